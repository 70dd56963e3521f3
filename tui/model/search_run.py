"""A knob search under way, as both the CLI's `search` and the dashboard's Search pane run it.

Its steps, each a request its driver sends and an answer the driver hands back: the search; after
a candidate crashed the engine process under it, the search again in a fresh one without that
candidate (after_crash), keeping what was found; then the contender, pinned, beside the pick in a
fresh process (the search's retires), for the figures a pinned run reads. The CLI waits on each
answer (process/session.py); the dashboard hands them over as they arrive (app/searching.py).
Plain records in and out, beside the rules it follows (search_results.py), so both can use it.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from .config import SdpaConfig
from .results import Environment, RunResult
from .search_results import FreshRun, SearchOptions, SearchResult, after_crash, fresh_config, with_fresh
from .statuses import STATUS_CRASH, STATUS_ERROR


@dataclass(frozen=True)
class SearchAgain:
    """Search again, in the fresh process, with these options (the crashed candidate left out)."""

    options: SearchOptions
    words: str  # what to tell the user


@dataclass(frozen=True)
class RunFresh:
    """Run this configuration (the contender pinned) beside the pick in a fresh process."""

    config: SdpaConfig
    words: str


@dataclass(frozen=True)
class Done:
    result: SearchResult


Step = SearchAgain | RunFresh | Done


class SearchRun:
    """One knob search: its configuration and options, the engine's last words about it (what a
    crash interrupted), when its request went (how much of the budget a crash spent), and what it
    found while the contender runs fresh."""

    def __init__(self, config: SdpaConfig, options: SearchOptions) -> None:
        self.config = config
        self.options = options
        self.step = ""
        self.sent_at = 0.0
        self.found: SearchResult | None = None

    def sent(self) -> None:
        """The search's request went to the engine."""
        self.step, self.sent_at = "", time.monotonic()

    def searched(self, result: SearchResult) -> Step:
        """The search's answer (or its loss): go on after a crash, run the contender fresh, or done."""
        going_on = after_crash(self.options, result, self.step, time.monotonic() - self.sent_at)
        if going_on is not None:
            self.options = going_on
            words = f"a candidate crashed the engine ({going_on.crashes[-1]}): going on in a fresh one"
            return SearchAgain(going_on, words)
        config = fresh_config(result)
        if config is None:
            return Done(result)
        self.found = result
        return RunFresh(config, f"running {config.plan} beside the pick in a fresh engine process")

    def lost(self, reason: str, crashed: bool, environment: Environment | None) -> SearchResult:
        """The search's answer when its engine process went under it (a crash is a finding)."""
        status = STATUS_CRASH if crashed else STATUS_ERROR
        return SearchResult(config=self.config, status=status, message=f"{reason} ({self.step or 'starting'})",
                            stopped=self.step, environment=environment, crashes=self.options.crashes)  # fmt: skip

    def fresh_answered(self, run: RunResult) -> SearchResult:
        """The search's record with what the fresh run measured of the pin and the pick."""
        return with_fresh(self.found, run)

    def fresh_missing(self, message: str) -> SearchResult:
        """The search's record when the fresh run gave no figures (stopped, or lost): why."""
        plan = self.found.contender.plan if self.found.contender is not None else ""
        return dataclasses.replace(self.found, fresh=FreshRun(plan, message=message))
