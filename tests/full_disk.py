"""A disk that fills part way through a write: the writer's low-level write (store/files.py's
_write_all) takes so many bytes, then says what a full disk says."""

from __future__ import annotations

import errno
import os

from tui.store import files


def full_after(monkeypatch, room: int) -> None:
    """From now on the disk takes `room` bytes more, across every write, then ENOSPC."""
    real = files._write_all
    left = [room]

    def write(fd: int, data: bytes) -> None:
        taken = bytes(data[: left[0]])
        if taken:
            real(fd, taken)
            left[0] -= len(taken)
        if len(taken) < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "_write_all", write)
