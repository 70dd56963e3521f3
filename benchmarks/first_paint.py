"""Launch to first frame, as a person sees it: the dashboard started in a terminal (a pseudo-terminal
of 140x44), timed from the launch until its first frame's footer is written, then quit with Ctrl+Q.
Each launch is a fresh process with its fork server, so the time includes Python's start, the
imports, the engine's fork server starting beside it and Textual's first frame.

    python -m benchmarks.first_paint [--repeat N] [-- COMMAND ...]
    python -m benchmarks.first_paint --profile FILE [--sort cumulative|tottime|ncalls]

The command defaults to `uv run sdpa-explorer`. Targets (not test assertions): at most 1.5 s on a
2-core machine, 1.0 s on the H200 (`python3 -m tui`). `--profile` launches the dashboard the same way (`python -m tui`, in the same
terminal) under cProfile, from its first import until the frame that shows the form's first label
and the footer's keys, writes the profile to FILE (for pstats or snakeviz) and prints its top
entries; the profiler's overhead makes that launch about twice as slow, so time it without.
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
import sys
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


def profiled_launch(out: str) -> None:
    """The dashboard as `python -m tui` starts it, under cProfile until its first full frame is
    written (the form's first label and the footer's keys), the profile then saved to `out`."""
    import cProfile
    import gc
    import runpy

    gc.disable()  # as tui/__main__.py does
    profile = cProfile.Profile()
    profile.enable()
    from textual.app import App

    display = App._display

    def display_then_look(app: App, screen, renderable) -> None:
        display(app, screen, renderable)
        footer = app.query("FooterKey")
        if footer and any(key.action == "switch_region" for key in footer):
            profile.disable()
            profile.dump_stats(out)
            app.exit()

    App._display = display_then_look  # type: ignore[method-assign]
    sys.argv = ["tui"]
    runpy.run_module("tui", run_name="__main__", alter_sys=True)


def profile_first_frame(out: str, sort: str, top: int = 40) -> int:
    """Launch the profiled dashboard in the terminal, wait for it to end, and print the top entries."""
    command = [sys.executable, "-m", "benchmarks.first_paint", "--profile-child", out]
    if os.path.exists(out):
        os.remove(out)
    seen = first_frame(command, timeout_s=60.0)
    if not os.path.exists(out):
        print(f"no profile was written to {out} (first frame seen: {seen})")
        return 1
    import pstats

    pstats.Stats(out).sort_stats(sort).print_stats(top)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=6, help="launches; the median is reported")
    parser.add_argument("--profile", metavar="FILE", help="one launch under cProfile, saved to FILE")
    parser.add_argument(
        "--sort",
        default="cumulative",
        choices=("cumulative", "tottime", "ncalls"),
        help="the profile's order",
    )
    parser.add_argument("--profile-child", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="*", default=["uv", "run", "sdpa-explorer"])
    args = parser.parse_args(argv)
    if args.profile_child:
        profiled_launch(args.profile_child)
        return 0
    if args.profile:
        return profile_first_frame(args.profile, args.sort)
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
