"""The engine process's own side: its loop over requests, one Engine and one CUDA context.

Started by client.EngineClient through launcher.py (`engine_main` is its entry); what it is
asked and answers is protocol.py's. Kept apart so that the parent never imports what only the child needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from typing import Any

from ..model.config import SdpaConfig
from ..model.results import Environment, RunResult
from ..model.search_results import SearchResult
from ..model.statuses import STATUS_CANCELLED
from .protocol import (
    EXIT_CONTEXT_LOST,
    EXIT_RETIRED,
    Cancel,
    ExplainReply,
    ExplainRequest,
    FaultRequest,
    Progress,
    Ready,
    Request,
    RunReply,
    RunRequest,
    SearchReply,
    SearchRequest,
    Stop,
)


class _Inbox:
    """What the child has been asked. Between requests only the newest waiting one is run; during
    a run each progress report (and each chunk of a CPU check) looks at the pipe, and a cancel, a
    newer request or a stop ends the run there (what arrived is kept for the loop)."""

    def __init__(self, recv: Any) -> None:
        self.recv = recv
        self.pending: Request | Stop | None = None

    def next(self) -> tuple[Request | Stop, bool]:
        """The next message to act on, and whether it was cancelled before it started."""
        msg, self.pending = (self.pending or self._receive()), None
        cancelled = False
        while self.recv.poll():
            newer = self._receive()
            if isinstance(newer, Stop):
                return newer, False
            if isinstance(newer, Cancel):
                cancelled = cancelled or (not isinstance(msg, Stop) and newer.request_id == msg.request_id)
                continue
            msg, cancelled = newer, False
        return msg, cancelled

    def _receive(self) -> Request | Stop | Cancel:
        msg = self.recv.recv()
        if not isinstance(msg, (RunRequest, ExplainRequest, SearchRequest, FaultRequest, Cancel, Stop)):
            raise TypeError(f"not a request of protocol.py: {type(msg).__name__}")
        return msg

    def check(self, request_id: int) -> None:
        from ..engine.cancel import Cancelled

        while self.recv.poll():
            newer = self._receive()
            if isinstance(newer, Cancel):
                if newer.request_id == request_id:
                    raise Cancelled("asked to stop")
                continue
            self.pending = newer
            raise Cancelled("the engine is closing" if isinstance(newer, Stop) else "a newer request came")


def _serve(recv: Any, send: Any, environment_override: dict | None) -> None:
    """The child's main loop: requests in on `recv`, replies out on `send`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C belongs to the UI
    from ..engine.environment import collect
    from ..engine.runner import Engine

    env = Environment(**environment_override) if environment_override else collect()
    engine = Engine(environment=env)
    if env.gpu_available:
        engine.warm_up()
    send.send(Ready(dataclasses.asdict(env)))
    inbox = _Inbox(recv)
    while True:
        try:
            msg, cancelled = inbox.next()
        except (EOFError, OSError):
            return
        if isinstance(msg, Stop):
            return
        retire = False
        try:
            if isinstance(msg, ExplainRequest):
                send.send(ExplainReply(msg.request_id, *_explained(engine, msg.config)))
            elif isinstance(msg, SearchRequest):
                searched = _searched(engine, msg, cancelled, inbox, send)
                send.send(SearchReply(msg.request_id, searched.to_dict()))
                retire = env.gpu_available and bool(searched.trials)  # it built and ran plans
            else:
                send.send(RunReply(msg.request_id, _answer(engine, msg, cancelled, inbox, send).to_dict()))
                # a run that asks it (the hunt's crash candidates) leaves the next to a fresh process
                retire = isinstance(msg, RunRequest) and msg.options.retire_after
        except (EOFError, OSError):
            return
        if engine.lost is not None or retire:  # nothing more can run here, or nothing should
            sys.stdout.flush()
            sys.stderr.flush()
            # no CUDA teardown: it would fail on a lost context, and a retiring process needs none
            os._exit(EXIT_CONTEXT_LOST if engine.lost is not None else EXIT_RETIRED)


def _answer(
    engine: Any, msg: RunRequest | FaultRequest, cancelled: bool, inbox: _Inbox, send: Any
) -> RunResult:
    """One request's result: a run (stopped at a step when asked, or between the chunks of a CPU
    reference, its peer and their inputs), or the context lost on purpose."""
    from ..engine.cancel import checking

    if isinstance(msg, FaultRequest):
        return engine.lose_context()
    if cancelled:
        return RunResult(config=msg.config, status=STATUS_CANCELLED, message="stopped before it started")
    with checking(lambda: inbox.check(msg.request_id)):
        return engine.run(msg.config, msg.options, progress=_reporter(msg.request_id, inbox, send))


def _reporter(request_id: int, inbox: _Inbox, send: Any) -> Any:
    """A request's progress said to the parent, and the pipe looked at for a cancel or a newer one."""

    def progress(text: str) -> None:
        send.send(Progress(request_id, text))
        inbox.check(request_id)

    return progress


def _searched(engine: Any, msg: SearchRequest, cancelled: bool, inbox: _Inbox, send: Any) -> SearchResult:
    """A knob search, its progress said at each candidate; a cancel or a newer request stops it
    there, with what it found so far."""
    if cancelled:
        return SearchResult(config=msg.config, status=STATUS_CANCELLED, message="stopped before it started")
    return engine.search(msg.config, msg.options, progress=_reporter(msg.request_id, inbox, send))


def _explained(engine: Any, config: SdpaConfig) -> tuple[dict | None, str]:
    """Who refuses `config` and what near it works, on this engine's GPU and handle (validate()
    alone without a GPU), as (explanation dict, ''); or (None, why) when asking failed. It is asked
    whole, whatever arrives meanwhile: it executes nothing, and a request that came meanwhile runs
    next."""
    from ..engine.explain import explain

    env = engine.environment()
    try:
        handle = engine.cudnn_handle() if env.gpu_available else None  # the engine's own, one a process
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
