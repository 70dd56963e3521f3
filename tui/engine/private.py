"""A folder only this user can change: where the plan cache keeps native code and where the engine
server listens. Made 0700 if missing; one that is not ours, or that others may write, is refused."""

from __future__ import annotations

import os
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
