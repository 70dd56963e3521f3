"""What only this user can change: a folder (where the plan cache keeps native code and where the
engine server listens), made 0700 if missing, one that is not ours or that others may write
refused; and the uid at the other end of a socket (the engine server and its callers check it)."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path


class FolderRefused(Exception):
    """The folder is not one we can trust (the message says why)."""


def private_folder(folder: Path) -> Path:
    """Create `folder` (0700, with its parents) or check the one there; raise FolderRefused or
    OSError when it cannot be trusted."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.lstat()
    if not folder.is_dir() or folder.is_symlink():
        raise FolderRefused(f"{folder} is not a folder")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise FolderRefused(f"{folder} belongs to another user")
    if st.st_mode & 0o022:
        raise FolderRefused(f"{folder} is writable by others (mode {st.st_mode & 0o777:o})")
    return folder


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), or None where it cannot
    be read."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    return struct.unpack("3i", creds)[1]
