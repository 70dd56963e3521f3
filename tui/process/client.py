"""The engine's own child process, and the protocol to it.

cuDNN can crash its process (a SIGSEGV in native code cannot be caught) or hang in a
build. So the CUDA context, the handle and the graph cache live in a child process;
the parent keeps only small records. If the child dies or goes silent for longer than
`time_limit_s` while working, the client says so, starts a fresh child and carries on;
what the user had is untouched.

A run that loses the CUDA context (an illegal address in cuDNN, say) is answered with its crash,
and then the child exits with EXIT_CONTEXT_LOST: a lost context cannot be recovered in its
process. The client starts a fresh child, which runs the request queued behind the crash.
A child that cannot start at all is tried MAX_FAILED_STARTS times in a row, then left down
until the next request. After answering a knob search on the GPU, or a run that asks it
(RunOptions.retire_after: the hunt's crash candidates), the child retires (EXIT_RETIRED):
the client starts a fresh one quietly (no death is reported), which takes any request sent since.

The child (child.py: its loop) is forked from a server that imported torch once and never touched
CUDA (launcher.py), and talks over two pipes; the UI owns the terminal, so the child's stdout and
stderr go to a log file. What crosses the pipes is protocol.py's: a request (run, explain, search,
fault), a Cancel or a Stop one way; Ready, then Progress and one reply a request, the other way.
The child runs only the newest waiting request: results for configurations the user
has already left are never computed. An explanation builds plans but executes none; it runs in
the child all the same, since a plan build can crash in native code as a run can.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..model.config import SdpaConfig
from ..model.results import Environment, RunResult
from . import launcher
from .protocol import (
    EXIT_CONTEXT_LOST,
    EXIT_RETIRED,
    Cancel,
    ExplainReply,
    ExplainRequest,
    FaultRequest,
    Progress,
    Ready,
    Reply,
    Request,
    RunReply,
    RunRequest,
    SearchReply,
    SearchRequest,
    Stop,
)

MAX_FAILED_STARTS = 3  # a child that dies before it is ready this often in a row is left down

if TYPE_CHECKING:
    from ..engine.explain import Explanation
    from ..model.options import RunOptions
    from ..model.search_results import SearchOptions, SearchResult


# ---- events the client reports (plain records: the UI turns them into its messages) ----------
@dataclass(frozen=True)
class EngineReady:
    environment: Environment
    startup_seconds: float
    restarts: int = 0  # how many times the engine process was started afresh so far
    last_restart: str = ""  # why, the last time


@dataclass(frozen=True)
class EngineProgress:
    request_id: int
    text: str


@dataclass(frozen=True)
class EngineResult:
    request_id: int
    result: RunResult


@dataclass(frozen=True)
class EngineExplained:
    request_id: int
    explanation: Explanation | None  # None: asking failed, and `error` says why
    error: str = ""


@dataclass(frozen=True)
class EngineSearched:
    request_id: int
    result: SearchResult


@dataclass(frozen=True)
class EngineDied:
    reason: str
    request_id: int | None  # the request lost with the process, if any
    context_lost: bool = False  # it exited after a run lost the CUDA context (that run's result came)
    restarting: bool = True  # False: it failed to start too often and is left down until the next request
    crashed: bool = False  # killed by a signal nobody sent: a crash in native code


EngineEvent = EngineReady | EngineProgress | EngineResult | EngineExplained | EngineSearched | EngineDied
EventSink = Callable[[EngineEvent], None]


@runtime_checkable
class EngineClientProtocol(Protocol):
    """What a UI needs of an engine: the real child process, or a test's scripted stand-in.

    Events arrive on `on_event` from any thread, in the order the engine said them; `submit`
    never blocks, and only the newest waiting request is answered."""

    def start(self, on_event: EventSink) -> None: ...

    def submit(self, config: SdpaConfig, options: RunOptions) -> int: ...

    def explain(self, config: SdpaConfig) -> int: ...

    def search(self, config: SdpaConfig, options: SearchOptions) -> int: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...

    @property
    def busy(self) -> bool: ...


# signals a process raises on itself when its native code fails; any other came from outside
NATIVE_CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}
)


def exit_reason(code: int | None) -> str:
    """Why the engine process is gone, in the words the status line shows: only what is known."""
    if code is None:
        return "the engine process stopped answering"
    if code == EXIT_CONTEXT_LOST:
        return "a run lost the CUDA context, so the engine process exited to start with a fresh one"
    if code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"the engine process died (signal {-code})"
        if sig in NATIVE_CRASH_SIGNALS:
            return f"the engine process died ({sig.name}, a crash in native code)"
        if sig == signal.SIGKILL:
            return (
                "the engine process died (SIGKILL, sent from outside it: the out-of-memory killer or a user)"
            )
        return f"the engine process died ({sig.name}, sent from outside it)"
    return f"the engine process exited with code {code}"


def native_crash(code: int | None) -> bool:
    """Whether an exit code says the process's own native code failed (a finding: status crash)."""
    return code is not None and code < 0 and -code in NATIVE_CRASH_SIGNALS  # Signals are ints


def silence_reason(time_limit_s: float) -> str:
    """Why a working engine that said nothing for too long was stopped."""
    return f"the engine was silent for more than {time_limit_s:g} s and was stopped"


def log_path() -> str:
    """Where the child's stdout/stderr go (native libraries print; the terminal belongs to the UI)."""
    from platformdirs import user_log_dir

    folder = user_log_dir("sdpa-explorer", appauthor=False)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, "engine.log")


class EngineClient:
    """The parent's side: start the child, send requests, turn replies into events.

    `on_event` is called from the client's reader thread; a UI must hop to its own
    thread from there. Headless and UI-free so the CLI and tests can drive it too.
    """

    def __init__(
        self,
        time_limit_s: float = 180.0,
        environment_override: Environment | None = None,
        log_file: str | None = "auto",
        device: int | None = None,
    ):
        self.on_event: EventSink = lambda _event: None
        self.time_limit_s = time_limit_s
        self._env_override = dataclasses.asdict(environment_override) if environment_override else None
        self._log_file = log_path() if log_file == "auto" else log_file
        self.device = device  # the box's visible GPU the engine uses (None: CUDA's first)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._proc: launcher.Launched | None = None
        self._send: Any = None
        self._recv: Any = None
        self._in_flight: int | None = None
        self._unsent: Request | None = None  # the newest request, until a live child has it
        self._newest: Request | None = None  # the newest request, to send again after a lost context
        self._failed_starts = 0  # children in a row that died before they were ready
        self._last_restart = ""
        self._last_word = 0.0
        self._started_at = 0.0
        self._ready = False  # the current child has said it is ready
        self._closing = False
        self._reader: threading.Thread | None = None
        self.restarts = 0

    # ---- lifecycle -------------------------------------------------------------------
    def start(self, on_event: EventSink) -> None:
        self.on_event = on_event
        self._spawn()

    def _spawn(self, before_reading: Callable[[], None] = lambda: None) -> None:
        """Start a child, from a thread of its own: the first start waits for the fork server to
        import torch, and the caller (the UI's event loop) must not. `before_reading` runs once
        the child exists and before any word of it is read, so an event it sends (the old child's
        death) comes before the new child's ready."""
        self._started_at = time.perf_counter()
        self._reader = threading.Thread(
            target=self._launch_and_read, args=(before_reading,), daemon=True, name="sdpa-engine-reader"
        )
        self._reader.start()

    def _launch_and_read(self, before_reading: Callable[[], None]) -> None:
        from .child import engine_main

        try:
            proc, send, recv = launcher.launch(engine_main, (self._env_override, self.device), self._log_file)
        except Exception as exc:  # no process could be started at all: said, and tried again on request
            with self._lock:
                self._failed_starts = MAX_FAILED_STARTS
                request_id, self._in_flight, self._unsent = self._in_flight, None, None
            before_reading()
            self.on_event(EngineDied(str(exc), request_id, restarting=False))
            return
        with self._lock:
            self._proc, self._send, self._recv, self._ready = proc, send, recv, False
            unsent, self._unsent = self._unsent, None
        if self._closing:  # closed while it started
            proc.kill()
            proc.wait(timeout=2)
            proc.release()
            return
        if unsent is not None:  # asked for while no child was up: this one runs it
            with contextlib.suppress(OSError):
                send.send(unsent)
        before_reading()
        self._read(proc, recv)

    def close(self) -> None:
        self._closing = True
        with self._lock:
            proc, send, ready = self._proc, self._send, self._ready
        if proc is not None and not ready:
            proc.kill()  # still loading torch: nothing of its own to put away, no need to wait
        elif send is not None:
            with contextlib.suppress(OSError):
                send.send(Stop())
        if proc is not None:
            if proc.wait(timeout=2) is None:
                proc.kill()
                proc.wait(timeout=2)
            proc.release()

    @property
    def log_file(self) -> str | None:
        """Where the engine process's own output goes (None: nowhere)."""
        return self._log_file

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def busy(self) -> bool:
        return self._in_flight is not None

    # ---- requests --------------------------------------------------------------------
    def submit(self, config: SdpaConfig, options: RunOptions) -> int:
        """Queue a run; returns its request id. Never blocks on the engine."""
        request_id = next(self._ids)
        return self._send_request(RunRequest(request_id, config, options))

    def explain(self, config: SdpaConfig) -> int:
        """Queue an explanation of `config` (tui.engine.explain); answered by EngineExplained. Like
        a run it is the newest request: one asked for after it takes its place if it waits."""
        return self._send_request(ExplainRequest(next(self._ids), config))

    def search(self, config: SdpaConfig, options: SearchOptions) -> int:
        """Queue a knob search of `config` (tui.engine.knob_trials); answered by EngineSearched. Its
        progress comes at each candidate, and a cancel stops it there with what it found."""
        return self._send_request(SearchRequest(next(self._ids), config, options))

    def cancel(self) -> None:
        """Stop the run in flight at its next step; it is answered with a cancelled result. A
        request not yet delivered (the engine was restarting) is simply dropped."""
        with self._lock:
            request_id, send = self._in_flight, self._send
            if request_id is not None and self._unsent is not None and self._unsent.request_id == request_id:
                self._unsent = self._newest = None
                self._in_flight = None
                return
        if request_id is not None:
            with contextlib.suppress(OSError):
                send.send(Cancel(request_id))

    def inject_fault(self) -> int:
        """Ask the engine to lose its CUDA context on purpose (an illegal address in a cuDNN
        kernel): how the soak proves that a lost context costs one process and no more."""
        return self._send_request(FaultRequest(next(self._ids)))

    def _send_request(self, msg: Request) -> int:
        request_id = msg.request_id
        with self._lock:
            self._in_flight = request_id
            self._last_word = time.perf_counter()
            self._unsent, self._newest, send = msg, msg, self._send
            down = self._failed_starts >= MAX_FAILED_STARTS
        if down:  # left down after failed starts: a new request tries once more
            self._failed_starts = 0
            self._spawn()
            return request_id
        if send is None:  # the first child is still starting: it takes the request once it is up
            return request_id
        try:
            send.send(msg)
        except OSError:
            return request_id  # a dead child: the reader notices, and sends it to the next one
        with self._lock:
            if self._unsent is msg:
                self._unsent = None
        return request_id

    # ---- reader thread ------------------------------------------------------------------
    def _read(self, proc: launcher.Launched, conn: Any) -> None:
        while not self._closing:
            try:
                has_data = conn.poll(0.1)
                msg = conn.recv() if has_data else None
            except (EOFError, OSError):
                proc.wait(timeout=1)
                self._exited(proc)
                return
            if msg is not None:
                self._last_word = time.perf_counter()
                self._dispatch(msg)
                continue
            if proc.poll() is not None:
                self._exited(proc)
                return
            if self._in_flight is not None and time.perf_counter() - self._last_word > self.time_limit_s:
                proc.kill()
                proc.wait(timeout=5)
                self._died(proc, silence_reason(self.time_limit_s))
                return

    def _exited(self, proc: launcher.Launched) -> None:
        code = proc.poll()
        self._died(proc, exit_reason(code), crashed=native_crash(code))

    def _dispatch(self, msg: Reply) -> None:
        if isinstance(msg, Ready):
            self._ready = True
            self._failed_starts = 0
            startup = time.perf_counter() - self._started_at
            self.on_event(
                EngineReady(Environment(**msg.environment), startup, self.restarts, self._last_restart)
            )
        elif isinstance(msg, Progress):
            if msg.request_id == self._in_flight:
                self.on_event(EngineProgress(msg.request_id, msg.text))
        elif isinstance(msg, RunReply | ExplainReply | SearchReply):
            with self._lock:
                if msg.request_id == self._in_flight:
                    self._in_flight = None
            self.on_event(_event_of(msg))

    def _died(self, proc: launcher.Launched, reason: str, crashed: bool = False) -> None:
        if self._closing:
            return
        lost_context = proc.returncode == EXIT_CONTEXT_LOST
        retired = proc.returncode == EXIT_RETIRED
        with self._lock:
            request_id = self._in_flight
            if (lost_context or retired) and request_id is not None:  # queued behind: the next child runs it
                self._unsent, request_id = self._newest, None
            else:
                self._in_flight = None
                if self._unsent is not None and self._unsent.request_id == request_id:
                    self._unsent = None  # reported lost with the child: not run by the next one
            conns = (self._send, self._recv)
            self._failed_starts = 0 if self._ready else self._failed_starts + 1
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()
        proc.release()
        if retired:  # its work done: a fresh child, nothing to report
            self._spawn()
            return
        if self._failed_starts >= MAX_FAILED_STARTS:
            reason += f"; it failed to start {self._failed_starts} times in a row (its log: {self._log_file})"
            self.on_event(EngineDied(reason, request_id, restarting=False, crashed=crashed))
            return
        self.restarts += 1
        self._last_restart = reason
        time.sleep(0.5 * self._failed_starts)  # a child that cannot start: not in a tight loop
        died = EngineDied(reason, request_id, context_lost=lost_context, crashed=crashed)
        self._spawn(before_reading=lambda: self.on_event(died))


def _event_of(reply: RunReply | ExplainReply | SearchReply) -> EngineEvent:
    """A request's answer as the event the UI is told of, its records rebuilt from their dicts."""
    if isinstance(reply, RunReply):
        return EngineResult(reply.request_id, RunResult.from_dict(reply.result))
    if isinstance(reply, SearchReply):
        from ..model.search_results import SearchResult

        return EngineSearched(reply.request_id, SearchResult.from_dict(reply.result))
    from ..engine.explain import Explanation

    explanation = Explanation.from_dict(reply.explanation) if reply.explanation is not None else None
    return EngineExplained(reply.request_id, explanation, reply.error)
