"""A knob search from the dashboard: the form's configuration searched (tui.engine.knob_trials)
through the app's own engine client, so the UI never waits on cuDNN and a candidate that crashes
native code costs the engine process, not the dashboard.

The client answers only the newest waiting request, and a newer request stops a search at its next
candidate. So a search starts once the engine has nothing of the form's (the form's run comes
first), and while it runs the form's edits start nothing, the Explain pane asks nothing and no
sweep starts: the form runs when the search ends, if it changed or Ctrl+R asked. Esc (or Cancel)
stops it at the next candidate; the answer keeps what it found. A candidate that crashes the engine
process costs that process: the search goes on in a fresh one without it (after_crash), as the
CLI's does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from textual.css.query import NoMatches
from textual.widgets import Input

from ..jobs.scheduler import JOB_WORDS, SEARCH
from ..model.options import RunOptions
from ..model.search_results import SearchOptions, SearchResult
from ..model.search_run import Done, RunFresh, SearchAgain, SearchRun
from ..process.client import EngineDied, EngineEvent, EngineProgress, EngineResult, EngineSearched
from .host import Host
from .messages import BestPinned

if TYPE_CHECKING:
    from .widgets.search import SearchPane

SEARCH_TAB = "tab-search"


@dataclass
class SearchShown:
    """The dashboard's side of a search asked for (model/search_run.py's SearchRun): its request
    once the engine has it (None while the form's run goes first), and the fresh run's."""

    job: SearchRun
    request_id: int | None = None
    fresh_id: int | None = None  # the contender's fresh run, while it runs


def search_options(budget_s: float, peers: tuple[str, ...]) -> SearchOptions:
    """The CLI's defaults, its peers (FLASH, EFFICIENT) and those the form ticks timed beside."""
    default = SearchOptions()
    return SearchOptions(budget_s=budget_s, peers=tuple(dict.fromkeys((*default.peers, *peers))))


class Searches:
    """The dashboard's knob searches: one at a time, asked of the app's client as the scheduler
    lets it, its words to the Search pane; the last answer kept as the app's `search_result`."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.shown: SearchShown | None = None

    @property
    def pane(self) -> SearchPane:
        """The Search pane, once made (else NoMatches, as any query)."""
        return cast("SearchPane", self.app.query_one("#search"))

    @property
    def running(self) -> bool:
        return self.app.scheduler.running(SEARCH)

    def start(self, budget_text: str) -> bool:
        """Read the budget and the form; ask for the search once the engine is free. Whether it
        was asked."""
        from ..model.search_results import parse_budget

        pane = self.pane
        if self.shown is not None:
            return False
        try:
            budget_s = parse_budget(budget_text)
        except ValueError as exc:
            pane.show_budget_error(str(exc))
            return False
        pane.show_budget_error("")
        config, errors = self.app.form.read()
        if config is None:
            pane.say(f"Nothing to search until these fields are fixed: {', '.join(sorted(errors))}.")
            return False
        if self.app.client is None or not self.app.engine_started:
            pane.say("No engine runs here (the dashboard was opened to view a saved result).")
            return False
        if (other := self.app.scheduler.may_start(SEARCH)) is not None:
            pane.say(f"{JOB_WORDS[other]} runs: start the search when it ends (Esc stops it).")
            return False
        self.app.cancel_pending_run()
        self.shown = SearchShown(SearchRun(config, search_options(budget_s, self.app.form.options.peers)))
        self.app.scheduler.begin(SEARCH)
        self.next()
        return True

    def next(self) -> None:
        """Send the search asked for once the engine has nothing of the form's or the Explain pane's."""
        run = self.shown
        if run is None or run.request_id is not None:
            return
        with contextlib.suppress(NoMatches):
            pane = self.pane
            if self.app.scheduler.waits_for(SEARCH) is not None:
                pane.say(
                    f"The form's run comes first; then {run.job.config.label()} is searched.", running=True
                )
                self._said("waiting for the form's run")
                return
            self._send(run)
            pane.progress(run.job.config.label(), f"asked for a {run.job.options.budget_s:.0f} s search ...")

    def _send(self, run: SearchShown) -> None:
        run.request_id = self.app.scheduler.asked(
            SEARCH, self.app.client.search(run.job.config, run.job.options)
        )
        run.job.sent()
        self._said("asked")

    def _said(self, words: str) -> None:
        """The app's status line: the search, and what happens to an edit meanwhile."""
        self.app.status.state = self.app.status.state.sweeping(
            f"knob search: {words}; form edits wait for its end (Esc stops it)" if words else ""
        )

    def event(self, event: EngineEvent) -> bool:
        """An engine event about the search under way: whether it was only the search's."""
        run = self.shown
        if run is None or run.request_id is None:
            return False
        said_of = getattr(event, "request_id", None)
        if isinstance(event, EngineProgress) and said_of == run.request_id:
            run.job.step = event.text
            self.pane.progress(run.job.config.label(), event.text)
            self._said(event.text.removeprefix("searching: "))
            return True
        if isinstance(event, EngineSearched) and said_of == run.request_id:
            self._answered(event.result)
            return True
        if run.fresh_id is not None:
            return self._fresh_event(run, event)
        if isinstance(event, EngineDied) and (said_of == run.request_id or not event.restarting):
            lost = run.job.lost(event.reason, event.crashed, self.app.environment)
            self._answered(lost, go_on=event.restarting)
        return False  # the app reports the lost engine too

    def _answered(self, result: SearchResult, go_on: bool = True) -> None:
        """The search's answer, or its loss with the engine process: after a crash under a candidate
        it goes on in a fresh process without it; then the contender runs fresh; else it is shown."""
        run = self.shown
        step = run.job.searched(result) if go_on else Done(result)
        label = run.job.config.label()
        if isinstance(step, SearchAgain):
            self._send(run)
            self.pane.progress(label, step.words)
        elif isinstance(step, RunFresh):  # the contender, pinned, in the process that follows (it retires)
            run.fresh_id = self.app.scheduler.asked(SEARCH, self.app.client.submit(step.config, RunOptions()))
            self.pane.show(result)
            self.pane.progress(label, f"{step.words} ...")
            self._said(step.words)
        else:
            self._done(step.result)

    def _fresh_event(self, run: SearchShown, event: EngineEvent) -> bool:
        """An event of the fresh run of the contender: its progress, its answer or its loss."""
        said_of = getattr(event, "request_id", None)
        if isinstance(event, EngineProgress) and said_of == run.fresh_id:
            self.pane.progress(run.job.config.label(), f"fresh process: {event.text}")
            return True
        if isinstance(event, EngineResult) and said_of == run.fresh_id:
            self._done(run.job.fresh_answered(event.result))
            return True
        if isinstance(event, EngineDied) and (said_of == run.fresh_id or not event.restarting):
            self._done(run.job.fresh_missing(event.reason))
        return False

    def _done(self, result: SearchResult) -> None:
        self.shown, self.app.search_result = None, result
        self.app.scheduler.answered(SEARCH)
        run_asked = self.app.scheduler.end(SEARCH)
        self.pane.show(result)
        self.app.draw_shown()  # the Plans pane's finds
        self._said("")
        self._form_after(run_asked)

    def stop(self) -> None:
        """Esc or Cancel: stop at the next candidate (the answer keeps what was found); a search
        still waiting for the form's run is dropped."""
        run = self.shown
        if run is None:
            return
        if run.request_id is not None:
            self.app.client.cancel()
            words = (
                "stopping the fresh run ..."
                if run.fresh_id is not None
                else "stopping at the next candidate ..."
            )
            self.pane.progress(run.job.config.label(), words)
            return
        self.shown = None
        run_asked = self.app.scheduler.end(SEARCH)
        self.pane.say("Not started: stopped (Esc) while the form's run went on.")
        self._said("")
        self._form_after(run_asked)

    def _form_after(self, run_asked: bool) -> None:
        """The form's edits waited: it runs now if it changed (or Ctrl+R asked)."""
        config, _ = self.app.form.read()
        if run_asked or (
            config is not None
            and (config, self.app.live_options(self.app.form.options)) != self.app.last_request
        ):
            self.app.action_run()

    async def start_shown(self) -> None:
        """The palette's 'Search: start': the Search pane shown, its budget as typed."""
        pane = await self.app.show_pane(SEARCH_TAB)
        if pane is not None:
            with contextlib.suppress(NoMatches):
                self.start(pane.budget_text)

    def pin_best(self) -> None:
        """The palette's 'Search: pin the best found'."""
        with contextlib.suppress(NoMatches):
            if self.app.search_result is None or self.app.search_result.best is None:
                self.app.notify(
                    "No search has found a plan yet (F3: the Search pane).", title="Nothing to pin"
                )
                return
            self.pane.action_pin_best()

    def pinned(self, message: BestPinned) -> None:
        """The best found into the form's pinned plan; the form runs it, and Ctrl+S keeps it."""
        with contextlib.suppress(NoMatches):
            self.app.query_one("#f-plan", Input).value = message.plan
            current, _ = self.app.form.read_as_typed()
            other = current is not None and current.replace(plan=None) != message.searched.replace(plan=None)
            words = f"{message.plan} is the form's pinned plan" + (
                f" (found for {message.searched.label()})" if other else ""
            )
            self.app.notify(
                f"{words}; Ctrl+S keeps it in a preset.", title="Pinned the best found", markup=False
            )
