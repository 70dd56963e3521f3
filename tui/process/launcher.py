"""Starting an engine process quickly: forked from a server that imported torch once.

Importing torch costs seconds (4 s of CPU on a small machine, 3.7-5.9 s on the H200); neither a
fresh engine process after a crash, a hang or a lost context, nor the next launch, should pay it
again. So engine processes come first from the engine server (server.py), which outlives the
launch that started it; where it is turned off or cannot start, from the standard library's fork
server of this launch. Both import torch (and never CUDA: a process that holds a CUDA context must
not be forked) when the first engine starts, or earlier when `warm()` asks (the dashboard does at
launch, so torch loads while the UI imports and paints), and fork each engine from there. Where
neither can start (Windows), each engine is spawned afresh: slower, the same otherwise.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import threading
from multiprocessing.connection import Connection
from typing import Any

from . import server_client

PRELOAD = "tui.process.server_preload"
_warming: threading.Thread | None = None  # the thread reaching the engine server, while it does
_failed: set[str] = set()  # start methods that could not start an engine in this process
# one start at a time: sys.stderr is swapped while starting, and two threads swapping it at once
# (an engine a GPU) left it pointing at a closed file
_starting = threading.Lock()


class EngineProcess:
    """The engine process as the client sees it: its pid, a way to end it, and how it ended
    (`returncode`: None while it runs, negative for the signal that ended it)."""

    def __init__(self, process: multiprocessing.process.BaseProcess):
        self._process = process
        self.pid = process.pid
        self._code: int | None = None  # kept once the process object is put away

    @property
    def returncode(self) -> int | None:
        return self._code if self._code is not None else self.poll()

    def poll(self) -> int | None:
        with contextlib.suppress(ValueError):  # put away: its code was kept
            return self._process.exitcode
        return self._code

    def wait(self, timeout: float) -> int | None:
        """Its exit code once it has ended, or None if it still runs after `timeout` seconds."""
        with contextlib.suppress(ValueError):
            self._process.join(timeout)
        return self.poll()

    def kill(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # already gone, or already put away
            self._process.kill()

    def release(self) -> None:
        """Put away what is kept of an ended process (its sentinel, its place in the children)."""
        code = self.poll()
        if code is not None:
            self._code = code
            with contextlib.suppress(ValueError):
                self._process.close()


Launched = EngineProcess | server_client.ServedProcess  # one face: pid, returncode, poll, wait, kill, release


def _contexts() -> list[multiprocessing.context.BaseContext]:
    methods = [m for m in ("forkserver", "spawn") if m in multiprocessing.get_all_start_methods()]
    contexts = []
    for method in methods:
        if method in _failed:
            continue
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload([PRELOAD])
        contexts.append(ctx)
    return contexts or [multiprocessing.get_context("spawn")]


def warm() -> threading.Thread | None:
    """Start the engine server (or this launch's fork server) now, without waiting for it: it
    imports torch in its own process while the caller goes on, and the first `launch` forks from
    it. One that cannot start is left to `launch`, which says why or spawns instead. Call it
    before a UI captures the output. The engine server is reached from a thread, returned (tests
    join it); a fork server is started here, where swapping sys.stderr races no UI."""
    global _warming
    if server_client.enabled():
        if _warming is None or not _warming.is_alive():  # the CLI's, then the app's: one start
            _warming = threading.Thread(target=server_client.warm, daemon=True, name="sdpa-engine-warm")
            _warming.start()
        return _warming
    if _contexts()[0].get_start_method() == "forkserver":  # the first sets the server's preload
        with _quiet(), contextlib.suppress(Exception):
            multiprocessing.forkserver.ensure_running()
    return None


@contextlib.contextmanager
def _quiet():
    """One start at a time, with `sys.stderr` on the null device: the fork server's helper keeps
    `sys.stderr`'s descriptor, which a UI that captures output has replaced with one that has none."""
    with _starting, open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        yield


def launch(target: Any, args: tuple, log_file: str | None) -> tuple[Launched, Connection, Connection]:
    """Start `target(recv, send, *args, log_file)` in an engine process; return it with the
    parent's ends of the two pipes (send requests, receive replies)."""
    if "server" not in _failed:
        try:
            return server_client.launch(target, args, log_file)
        except server_client.ServerUnavailable:
            _failed.add("server")  # this launch's own fork server from now on
    error: Exception | None = None
    for ctx in _contexts():
        to_child_r, to_child_w = ctx.Pipe(duplex=False)
        to_parent_r, to_parent_w = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=target,
            args=(to_child_r, to_parent_w, *args, log_file),
            name="sdpa-engine",
            daemon=True,  # ended, not waited for, if the UI exits without closing it
        )
        try:
            with _quiet():
                process.start()
        except Exception as exc:  # the fork server could not start: spawn instead
            error = exc
            _failed.add(ctx.get_start_method())
            to_child_w.close()
            to_parent_r.close()
            continue
        finally:
            to_child_r.close()  # the engine's ends live in the engine only: its death reads as EOF
            to_parent_w.close()
        return EngineProcess(process), to_child_w, to_parent_r
    raise RuntimeError(f"the engine process could not be started: {error}")
