"""The engine process, one request at a time, for the CLI and the soak: each request is answered
by its result, or, when the process died under it, by a result that says so.

A configuration that crashes cuDNN then costs one engine process, not the cases after it:
`check` runs every case through one session, and the client starts a fresh process after a
crash. The dashboard talks to the same client without blocking (tui.app).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..model.config import SdpaConfig
from ..model.results import Crash, Environment, RunResult
from ..model.statuses import STATUS_CRASH, STATUS_ERROR
from . import client as process
from .client import EngineDied, EngineExplained, EngineProgress, EngineReady, EngineResult, EngineSearched

if TYPE_CHECKING:
    from ..engine.explain import Explanation
    from ..model.options import RunOptions
    from ..model.search_results import SearchOptions, SearchResult
    from ..model.search_run import RunFresh, SearchRun


class ExplainFailed(RuntimeError):
    """An explanation that did not come: the engine process died under it, or asking failed."""


def died_result(config: SdpaConfig, died: EngineDied, step: str, env: Environment | None) -> RunResult:
    """The answer to a request lost with its process: a native crash is a finding (crash), a hang
    or a refusal to start is an error."""
    crash = Crash(died.reason, step or "starting the run", context_lost=False) if died.crashed else None
    return RunResult(
        config=config,
        status=STATUS_CRASH if died.crashed else STATUS_ERROR,
        message=died.reason,
        environment=env,
        device="cuda" if env is not None and env.gpu_available else "",
        crash=crash,
    )


def _answers(event: process.EngineEvent, request_id: int) -> bool:
    """Whether `event` ends the wait for `request_id`: its answer, or the engine's end under it."""
    if isinstance(event, (EngineResult, EngineExplained, EngineSearched)):
        return event.request_id == request_id
    return isinstance(event, EngineDied) and (event.request_id == request_id or not event.restarting)


class EngineSession:
    """A blocking face of an engine client. Use as a context manager; `run` waits for its answer."""

    def __init__(self, client: process.EngineClientProtocol | None = None) -> None:
        self.client = client if client is not None else process.EngineClient()
        self._events: queue.Queue[process.EngineEvent] = queue.Queue()
        self.environment: Environment | None = None
        self.restarts = 0
        self.restart_reasons: list[str] = []
        self._down = ""  # why the engine cannot start, once it gave up

    def __enter__(self) -> EngineSession:
        self.client.start(self._events.put)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    @property
    def down(self) -> str:
        """Why the engine process cannot start ('' while it can)."""
        return self._down

    def ready(self) -> Environment | None:
        """Wait for the engine process; the environment it sees (None if it cannot start)."""
        while self.environment is None and not self._down:
            self._note(self._events.get())
        return self.environment

    def run(
        self, config: SdpaConfig, options: RunOptions, watch: Callable[[str], None] | None = None
    ) -> RunResult:
        """The answer to one run; `watch` hears the engine's progress words as they come."""
        return self._answer(self.client.submit(config, options), config, watch)

    def explain(self, config: SdpaConfig) -> Explanation:
        """Who refuses `config` and what near it works, asked in the engine process, where a plan
        build that crashes costs that process alone; ExplainFailed says why none came."""
        event, _step = self._wait(self.client.explain(config), None)
        if isinstance(event, EngineDied):
            raise ExplainFailed(event.reason)
        if not isinstance(event, EngineExplained) or event.explanation is None:
            raise ExplainFailed(getattr(event, "error", "") or "the engine answered something else")
        return event.explanation

    def search(
        self, config: SdpaConfig, options: SearchOptions, watch: Callable[[str], None] | None = None
    ) -> SearchResult:
        """A knob search's answer, its steps (model/search_run.py) each waited for. A candidate
        that crashes the engine process costs that process: the search goes on in a fresh one
        without it, keeping what was found, and the answer lists each crash; after MAX_CRASHES it
        says so. Then the contender runs, pinned, in a fresh process."""
        from ..model.search_run import RunFresh, SearchAgain, SearchRun

        run = SearchRun(config, options)
        step = run.searched(self._search_once(run, watch))
        while isinstance(step, SearchAgain):
            if watch is not None:
                watch(step.words)
            step = run.searched(self._search_once(run, watch))
        return self._fresh(run, step, watch) if isinstance(step, RunFresh) else step.result

    def _fresh(self, run: SearchRun, step: RunFresh, watch: Callable[[str], None] | None) -> SearchResult:
        """The contender, pinned, beside the pick in the fresh engine process that follows the
        search's (it retires): the figures a pinned run reads. Ctrl+C stops it, keeping the search's."""
        from ..model.options import RunOptions

        if watch is not None:
            watch(step.words)
        request_id = self.client.submit(step.config, RunOptions())
        try:
            answer = self._answer(request_id, step.config, watch)
        except KeyboardInterrupt:
            self.client.cancel()
            self._answer(request_id, step.config, None)
            return run.fresh_missing("stopped when asked")
        return run.fresh_answered(answer)

    def _search_once(self, run: SearchRun, watch: Callable[[str], None] | None) -> SearchResult:
        """One search request's answer; its loss with the engine process, said as a result."""
        request_id = self.client.search(run.config, run.options)  # type: ignore[attr-defined]
        run.sent()
        try:
            event, run.step = self._wait(request_id, watch)
        except KeyboardInterrupt:  # Ctrl+C: stop at the next candidate, keeping what was found
            self.client.cancel()
            event, run.step = self._wait(request_id, None)
        if isinstance(event, EngineSearched):
            return event.result
        died = event if isinstance(event, EngineDied) else None
        words = died.reason if died else "the engine answered a search with something else"
        return run.lost(words, died is not None and died.crashed, self.environment)

    def inject_fault(self) -> RunResult:
        """Have the engine lose its CUDA context on purpose (the soak's test); the crash it answers."""
        return self._answer(self.client.inject_fault(), SdpaConfig(), None)

    def _answer(self, request_id: int, config: SdpaConfig, watch: Callable[[str], None] | None) -> RunResult:
        event, step = self._wait(request_id, watch)
        if isinstance(event, EngineResult):
            return event.result
        if isinstance(event, EngineDied):
            return died_result(config, event, step, self.environment)
        return RunResult(
            config=config, status=STATUS_ERROR, message="the engine answered a run with an explanation"
        )

    def _wait(
        self, request_id: int, watch: Callable[[str], None] | None
    ) -> tuple[EngineResult | EngineExplained | EngineSearched | EngineDied, str]:
        """The engine's answer to one request, or its death under it; and the last step it named."""
        step = ""
        while True:
            event = self._events.get()
            self._note(event)
            if isinstance(event, EngineProgress) and event.request_id == request_id:
                step = event.text
                if watch is not None:
                    watch(step)
            elif _answers(event, request_id):
                return event, step

    def _note(self, event: process.EngineEvent) -> None:
        if isinstance(event, EngineReady):
            self.environment = event.environment
        elif isinstance(event, EngineDied):
            if event.restarting:
                self.restarts += 1
                self.restart_reasons.append(event.reason)
            else:
                self._down = event.reason
