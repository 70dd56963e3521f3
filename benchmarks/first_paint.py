"""Launch to first frame, as a person sees it: the dashboard started in a terminal (a pseudo-terminal
of 140x44), timed from the launch until its first frame's footer is written, then quit with Ctrl+Q.
Each launch is a fresh process with its fork server, so the time includes Python's start, the
imports, the engine's fork server starting beside it and Textual's first frame.

    python -m benchmarks.first_paint [--repeat N] [-- COMMAND ...]

The command defaults to `uv run sdpa-explorer`. Target (not a test assertion): at most 1.0 s on a
2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import statistics
import struct
import termios
import time

FOOTER = b"Form/panes"  # the footer's F6 key: the last row of a full first frame
FORM = b"batch"  # the form's first label
SIZE = (44, 140)  # rows, columns


def first_frame(command: list[str], timeout_s: float = 30.0) -> float | None:
    """Seconds from launching `command` in a pseudo-terminal until its first frame is written
    (None if it never was), the app then quit with Ctrl+Q."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, in the terminal
        os.environ["TERM"] = "xterm-256color"
        os.execvp(command[0], command)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", *SIZE, 0, 0))
    launched, written, seen = time.perf_counter(), b"", None
    try:
        while time.perf_counter() - launched < timeout_s:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    written += os.read(fd, 65536)
                except OSError:  # the terminal closed: the app ended
                    break
                if seen is None and FOOTER in written and FORM in written:
                    seen = time.perf_counter() - launched
                    os.write(fd, b"\x11")  # Ctrl+Q
            elif seen is not None and time.perf_counter() - launched > seen + 5:
                break  # it did not quit: ended below
    finally:
        with contextlib.suppress(ProcessLookupError):  # it quit
            os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=6, help="launches; the median is reported")
    parser.add_argument("command", nargs="*", default=["uv", "run", "sdpa-explorer"])
    args = parser.parse_args(argv)
    times = [first_frame(args.command) for _ in range(args.repeat)]
    seen = [t for t in times if t is not None]
    figures = {
        "command": " ".join(args.command),
        "first_frame_s": [round(t, 3) if t is not None else None for t in times],
        "median_s": round(statistics.median(seen), 3) if seen else None,
    }
    print(json.dumps(figures, indent=1))
    return 0 if len(seen) == len(times) else 1


if __name__ == "__main__":
    raise SystemExit(main())
