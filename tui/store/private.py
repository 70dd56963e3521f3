"""What only this user can change: a folder (where the plan cache keeps native code and where the
engine server listens), made 0700 if missing, one that is not ours or that others may write
refused; a lock file in such a folder, never opened through a link; and the uid at the other end
of a socket (the engine server and its callers check it)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path


class FolderRefused(Exception):
    """The folder is not one we can trust (the message says why)."""


def ours(st: os.stat_result) -> bool:
    """Whether this user owns the file `st` is of (always, where there are no uids)."""
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def checked_folder(folder: Path) -> Path:
    """`folder`, if it is a folder only this user can change; raise FolderRefused, or OSError
    where it cannot be read (missing: FileNotFoundError)."""
    st = folder.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise FolderRefused(f"{folder} is not a folder")
    if not ours(st):
        raise FolderRefused(f"{folder} belongs to another user")
    if st.st_mode & 0o022:
        raise FolderRefused(f"{folder} is writable by others (mode {st.st_mode & 0o777:o})")
    return folder


def private_folder(folder: Path) -> Path:
    """Create `folder` (0700, with its parents) or check the one there; raise FolderRefused or
    OSError when it cannot be trusted."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return checked_folder(folder)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock file `path` (created 0600) in a folder of ours: never one reached through a
    link, nor one that is not a regular file of ours (FolderRefused; OSError where none opens)."""
    import fcntl

    checked_folder(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FolderRefused(f"{path} is a link, not a lock file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not ours(st):
            raise FolderRefused(f"{path} is not a lock file of ours")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), or None where it cannot
    be read."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    return struct.unpack("3i", creds)[1]
