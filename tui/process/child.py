"""The engine process's own side: its loop over requests, one Engine and one CUDA context.

Started by process.EngineClient through launcher.py (`engine_main` is its entry); the protocol is
described in client.py. Kept apart so that the parent never imports what only the child needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from typing import Any

from ..model.config import SdpaConfig
from ..model.results import STATUS_CANCELLED, Environment, RunResult
from .client import EXIT_CONTEXT_LOST, EXIT_RETIRED


class _Inbox:
    """What the child has been asked. Between requests only the newest waiting one is run; during
    a run each progress report looks at the pipe, and a cancel, a newer request or a stop ends the
    run at that step (what arrived is kept for the loop)."""

    def __init__(self, recv: Any) -> None:
        self.recv = recv
        self.pending: tuple | None = None

    def next(self) -> tuple[tuple, bool]:
        """The next message to act on, and whether it was cancelled before it started."""
        msg, self.pending = (self.pending or self.recv.recv()), None
        cancelled = False
        while self.recv.poll():
            newer = self.recv.recv()
            if newer[0] == "stop":
                return newer, False
            if newer[0] == "cancel":
                cancelled = cancelled or newer[1] == msg[1]
                continue
            msg, cancelled = newer, False
        return msg, cancelled

    def check(self, request_id: int) -> None:
        from ..engine.runner import Cancelled

        while self.recv.poll():
            newer = self.recv.recv()
            if newer[0] == "cancel":
                if newer[1] == request_id:
                    raise Cancelled("asked to stop")
                continue
            self.pending = newer
            raise Cancelled("a newer request came" if newer[0] != "stop" else "the engine is closing")


def _serve(recv: Any, send: Any, environment_override: dict | None) -> None:
    """The child's main loop: requests in on `recv`, replies out on `send`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C belongs to the UI
    from ..engine.environment import collect
    from ..engine.runner import Engine

    env = Environment(**environment_override) if environment_override else collect()
    engine = Engine(environment=env)
    if env.gpu_available:
        engine.warm_up()
    send.send(("ready", dataclasses.asdict(env)))
    inbox = _Inbox(recv)
    while True:
        try:
            msg, cancelled = inbox.next()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        retire = False
        try:
            if msg[0] == "explain":
                send.send(("explained", msg[1], *_explained(engine, SdpaConfig.from_dict(msg[2]))))
            elif msg[0] == "search":
                searched = _searched(engine, msg, cancelled, inbox, send)
                send.send(("searched", msg[1], searched))
                retire = env.gpu_available and bool(searched.get("trials"))  # it built and ran plans
            else:
                send.send(("result", msg[1], _answer(engine, msg, cancelled, inbox, send).to_dict()))
        except (EOFError, OSError):
            return
        if engine.lost is not None or retire:  # nothing more can run here, or nothing should
            sys.stdout.flush()
            sys.stderr.flush()
            # no CUDA teardown: it would fail on a lost context, and a retiring process needs none
            os._exit(EXIT_CONTEXT_LOST if engine.lost is not None else EXIT_RETIRED)


def _answer(engine: Any, msg: tuple, cancelled: bool, inbox: _Inbox, send: Any) -> RunResult:
    """One request's result: a run (stopped at a step when asked), or the context lost on purpose."""
    from ..model.options import RunOptions

    if msg[0] == "fault":
        return engine.lose_context()
    request_id, config, options = msg[1], SdpaConfig.from_dict(msg[2]), RunOptions.from_dict(msg[3])
    if cancelled:
        return RunResult(config=config, status=STATUS_CANCELLED, message="stopped before it started")

    def progress(text: str) -> None:
        send.send(("progress", request_id, text))
        inbox.check(request_id)

    return engine.run(config, options, progress=progress)


def _searched(engine: Any, msg: tuple, cancelled: bool, inbox: _Inbox, send: Any) -> dict:
    """A knob search, its progress said at each candidate; a cancel or a newer request stops it
    there, with what it found so far."""
    from ..model.search_results import SearchOptions, SearchResult

    request_id, config = msg[1], SdpaConfig.from_dict(msg[2])
    if cancelled:
        return SearchResult(
            config=config, status=STATUS_CANCELLED, message="stopped before it started"
        ).to_dict()

    def progress(text: str) -> None:
        send.send(("progress", request_id, text))
        inbox.check(request_id)

    return engine.search(config, SearchOptions.from_dict(msg[3]), progress=progress).to_dict()


def _explained(engine: Any, config: SdpaConfig) -> tuple[dict | None, str]:
    """Who refuses `config` and what near it works, on this engine's GPU and handle (validate()
    alone without a GPU), as (explanation dict, ''); or (None, why) when asking failed. It is asked
    whole, whatever arrives meanwhile: it executes nothing, and a request that came meanwhile runs
    next."""
    from ..engine.explain import explain

    env = engine.environment()
    try:
        handle = engine._cudnn_handle() if env.gpu_available else None  # the engine's own, one a process
        return explain(config, gpu=env.gpu_available, handle=handle, environment=env).to_dict(), ""
    except Exception as exc:  # a failure to explain is said in the pane, never the engine's end
        return None, f"{type(exc).__name__}: {exc}"


def engine_main(
    recv: Any, send: Any, environment_override: dict | None, device: int | None, log_file: str | None
) -> None:
    """Entry of the engine process: a session of its own (the terminal's Ctrl+C and Ctrl+Z are the
    UI's), its output to the engine log (native libraries print; the terminal belongs to the UI),
    and, given `device`, that GPU alone (as CUDA device 0), chosen before CUDA starts."""
    with contextlib.suppress(OSError):  # already a session leader: spawned, not forked
        os.setsid()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_entry(os.environ.get("CUDA_VISIBLE_DEVICES"), device)
    out = os.open(log_file or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for fd in (1, 2):
        os.dup2(out, fd)
    os.close(out)
    _serve(recv, send, environment_override)


def visible_entry(visible: str | None, device: int) -> str:
    """The CUDA_VISIBLE_DEVICES entry of the box's `device`-th visible GPU: its own index when the
    variable is unset, else the device-th entry of the list it gives (indices or UUIDs)."""
    if visible is None:
        return str(device)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if not 0 <= device < len(entries):
        raise LookupError(f"GPU {device} is not among CUDA_VISIBLE_DEVICES={visible}")
    return entries[device]
