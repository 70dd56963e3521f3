"""A command given a FIFO, run so that a test fails rather than hangs where the command would wait
on it: should it still be running at the deadline, the FIFO gets a writer that closes at once
(its read ends), and the test is told it blocked."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from click.testing import CliRunner, Result

DEADLINE_S = 60.0  # generous: a command that does not wait on the FIFO answers in well under 1 s


def invoke_given_fifo(command, args: list[str], fifo: Path, env: dict | None = None) -> tuple[Result, bool]:
    """`command` run with `args` (naming `fifo` among them): its result, and whether it blocked."""
    done: list[Result] = []
    worker = threading.Thread(target=lambda: done.append(CliRunner().invoke(command, args, env=env)))
    worker.start()
    worker.join(DEADLINE_S)
    blocked = worker.is_alive()
    while worker.is_alive():  # it opened the FIFO to read, and waits for a writer: give it one
        with contextlib.suppress(OSError):  # no reader (yet, or any more)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(0.1)
    return done[0], blocked
