"""The one way the tool writes a file, so that a crash or a full disk never leaves a half-written
one, and so that only a regular file is ever replaced: a device, a FIFO or a folder at the path is
refused (as root, renaming over /dev/full would destroy the device node), a link's target is
written, no folder is created that the user did not ask for, and the tool's own files (the run
history's database, the plan cache's folder) are never an export's target.

A file is written whole to a temporary created exclusively beside it (O_EXCL, O_NOFOLLOW: a link
placed there beforehand is never written through), flushed, then renamed over the target. A file
that grows a line at a time (a sweep's rows) takes back a line it could not write whole.

A new file gets the mode the umask gives; a replaced one keeps its own. A temporary file that a
killed save left behind is removed by the next save into its folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import time
from pathlib import Path

from .places import history_path, plan_cache_folder

_NEW = os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

STALE_S = 3600.0  # a temporary file this old is left over, whoever made it
ORPHAN_S = 10.0  # one this old whose process is gone is left over (a save takes milliseconds)
_TEMP_RE = r"\.{name}\.(?:(?P<pid>\d+)-[0-9a-f]{{8}}|[a-z0-9_]{{8}})\.tmp"  # ours, and mkstemp's


class WriteRefused(OSError):
    """The path names something that must not be replaced by a file (said in words)."""


def resolved(path: Path | str) -> Path:
    """The file a write to `path` lands in: `~` expanded, links followed to their target."""
    return Path(os.path.realpath(Path(path).expanduser()))


def kind_words(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = (
        (stat.S_ISLNK, "a link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "a special file")


def write_problem(path: Path | str) -> str | None:
    """Why a file cannot be written at `path` (None: it can), asked before any work is done:
    something not a regular file there (a kernel's file of /proc or /sys is none, though it says
    so), a folder missing or not writable, or one that takes no new file (asked of the folder
    itself: root's access check passes where the file system refuses)."""
    target = resolved(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if mode is not None and not stat.S_ISREG(mode):
        return f"{kind_words(mode)} is there, not a regular file"
    folder = target.parent
    if mode is not None and _stores_nothing(folder):
        return "not a regular file (a kernel's file: its file system stores nothing)"
    if not folder.is_dir():
        return f"{folder} is not a folder" if folder.exists() else f"the folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return _new_file_problem(folder) or own_file(target)


def _stores_nothing(folder: Path) -> bool:
    """A file system of no blocks: the kernel's words (/proc, /sys), never a file's storage."""
    try:
        return os.statvfs(folder).f_blocks == 0
    except (OSError, AttributeError):  # AttributeError: a system without statvfs
        return False


def _new_file_problem(folder: Path) -> str | None:
    """Why `folder` takes no new file, asked by making one (as a save does) and removing it."""
    try:
        fd, tmp = _temp_beside(folder / "probe", 0o600)
    except PermissionError:
        return f"the folder {folder} is not writable"
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return f"the folder {folder} is on a read-only file system"
        return f"the folder {folder} takes no new files"
    os.close(fd)
    tmp.unlink(missing_ok=True)
    return None


def own_file(target: Path) -> str | None:
    """Why `target` (links followed) is one of the tool's own files, which no export replaces."""
    database = resolved(history_path())
    beside = {database.name + end for end in ("", "-wal", "-shm", "-journal")}  # SQLite's own
    if target.parent == database.parent and target.name in beside:
        return f"that is the run history's database ({database})"
    if target.is_relative_to(resolved(plan_cache_folder())):
        return f"that is in the plan cache's folder ({plan_cache_folder()})"
    return None


def atomic_write(path: Path | str, data: str | bytes, exclusive: bool = False, private: bool = False) -> Path:
    """Write a temporary file beside the target, flush it to disk, then rename it over the target
    (or, when `exclusive`, link it there: FileExistsError if anything is there, so of two saves
    racing for one name exactly one wins). `private`: a file of the plan cache's own folder,
    written 0600 in place of whatever regular file or link is at the path (no link followed).
    Returns the file written; OSError (WriteRefused for a target refused) when it was not."""
    target = Path(path) if private else resolved(path)
    problem = _private_problem(target) if private else write_problem(target)
    if problem:
        raise WriteRefused(problem)
    sweep_stale(target.parent, target.name)
    fd, tmp = _temp_beside(target, 0o600 if private else None)
    try:
        try:
            _write_all(fd, data.encode("utf-8") if isinstance(data, str) else data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            _link_new(tmp, target)
        else:
            os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _private_problem(target: Path) -> str | None:
    """Why a file of the tool's own folder cannot be replaced: something not a file is there."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    ok = stat.S_ISREG(mode) or stat.S_ISLNK(mode)
    return None if ok else f"{kind_words(mode)} is there, not a regular file"


def _write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` to `fd` (a write may take only part); OSError as the disk says it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _temp_beside(target: Path, mode: int | None = None) -> tuple[int, Path]:
    """A new temporary file in the target's folder, created exclusively (never a link or a file
    someone placed there), named for its process (so a later save can tell a killed one's), with
    `mode`, else the mode the umask gives a new file, or the target's own mode."""
    tmp = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | _NEW, 0o666 if mode is None else mode)
    try:
        os.fchmod(fd, mode if mode is not None else stat.S_IMODE(os.stat(target).st_mode))
    except FileNotFoundError:
        pass  # a new file: the umask already decided
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return fd, tmp


class LineFile:
    """A file that grows a whole line at a time (a sweep's rows, each kept as it finishes): a line
    that cannot be written whole (a full disk) is taken back, so the file ends on a whole line."""

    def __init__(self, path: Path | str) -> None:
        self.path = resolved(path)
        problem = write_problem(self.path)
        if problem:
            raise WriteRefused(problem)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        self._fd = os.open(self.path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
        mode = os.fstat(self._fd).st_mode
        if not stat.S_ISREG(mode):  # put there since the check
            os.close(self._fd)
            raise WriteRefused(f"{kind_words(mode)} is there, not a regular file")

    def append(self, line: str) -> None:
        """Write `line` (its newline included) and flush it to disk; OSError, the file as it was."""
        size = os.fstat(self._fd).st_size
        try:
            _write_all(self._fd, line.encode("utf-8"))
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LineFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _link_new(tmp: Path, target: Path) -> None:
    """Put the finished temporary file at `target` only if nothing is there."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: claim the name, then fill it atomically
        os.close(os.open(target, os.O_WRONLY | _NEW, 0o666))
        os.replace(tmp, target)


def sweep_stale(folder: Path, name: str | None = None) -> int:
    """Remove the temporary files killed saves left in `folder` (of `name` only, or of any file):
    old ones, and those whose process is gone. Best effort; returns how many went."""
    pattern = re.compile(_TEMP_RE.format(name=re.escape(name) if name else ".+"))
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and entry.is_file(follow_symlinks=False) and _is_stale(entry, match["pid"]):
            try:
                os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    return removed


def _is_stale(entry: os.DirEntry, pid: str | None) -> bool:
    try:
        age = time.time() - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return False
    return age > STALE_S or (age > ORPHAN_S and pid is not None and not _alive(int(pid)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or a number no pid is: keep its file until it is old
    return True
