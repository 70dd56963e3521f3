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

from textual.css.query import NoMatches
from textual.widgets import Input

from ..jobs.scheduler import SEARCH, SWEEP
from ..model.options import RunOptions
from ..model.search_results import SearchOptions, SearchResult
from ..model.search_run import Done, RunFresh, SearchAgain, SearchRun
from ..process.client import EngineDied, EngineEvent, EngineProgress, EngineResult, EngineSearched
from .messages import BestPinned, SearchAsked, SearchStopAsked

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


class SearchDriving:
    """Mixed into SdpaExplorerApp, whose client, form, status line and scheduler it uses."""

    _search: SearchShown | None = None
    _run_after_search = False  # Ctrl+R while a search ran: the form runs when it ends
    search_result: SearchResult | None = None  # the last search's answer

    @property
    def searching(self) -> bool:
        return self.scheduler.running(SEARCH)

    def on_search_asked(self, message: SearchAsked) -> None:
        with contextlib.suppress(NoMatches):  # asked as the app closes
            self.start_search(message.budget)

    def start_search(self, budget_text: str) -> bool:
        """Read the budget and the form; ask for the search once the engine is free. Whether it
        was asked."""
        from ..model.search_results import parse_budget

        pane = self.search_pane
        if self._search is not None:
            return False
        try:
            budget_s = parse_budget(budget_text)
        except ValueError as exc:
            pane.show_budget_error(str(exc))
            return False
        pane.show_budget_error("")
        config, errors = self.form.read()
        if config is None:
            pane.say(f"Nothing to search until these fields are fixed: {', '.join(sorted(errors))}.")
            return False
        if self.client is None or not self.engine_started:
            pane.say("No engine runs here (the dashboard was opened to view a saved result).")
            return False
        if self.scheduler.may_start(SEARCH) == SWEEP:
            pane.say("A sweep runs: start the search when it ends (Esc stops the sweep).")
            return False
        self.cancel_pending_run()
        self._search = SearchShown(SearchRun(config, search_options(budget_s, self.form.options.peers)))
        self.scheduler.begin(SEARCH)
        self.search_next()
        return True

    def search_next(self) -> None:
        """Send the search asked for once the engine has nothing of the form's or the Explain pane's."""
        run = self._search
        if run is None or run.request_id is not None:
            return
        with contextlib.suppress(NoMatches):
            pane = self.search_pane
            if self.scheduler.waits_for(SEARCH) is not None:
                pane.say(
                    f"The form's run comes first; then {run.job.config.label()} is searched.", running=True
                )
                self._search_said("waiting for the form's run")
                return
            self._send_search(run)
            pane.progress(run.job.config.label(), f"asked for a {run.job.options.budget_s:.0f} s search ...")

    def _send_search(self, run: SearchShown) -> None:
        run.request_id = self.scheduler.asked(SEARCH, self.client.search(run.job.config, run.job.options))
        run.job.sent()
        self._search_said("asked")

    def _search_said(self, words: str) -> None:
        """The app's status line: the search, and what happens to an edit meanwhile."""
        self.status.state = self.status.state.sweeping(
            f"knob search: {words}; form edits wait for its end (Esc stops it)" if words else ""
        )

    def search_event(self, event: EngineEvent) -> bool:
        """An engine event about the search under way: whether it was only the search's."""
        run = self._search
        if run is None or run.request_id is None:
            return False
        said_of = getattr(event, "request_id", None)
        if isinstance(event, EngineProgress) and said_of == run.request_id:
            run.job.step = event.text
            self.search_pane.progress(run.job.config.label(), event.text)
            self._search_said(event.text.removeprefix("searching: "))
            return True
        if isinstance(event, EngineSearched) and said_of == run.request_id:
            self._search_answered(event.result)
            return True
        if run.fresh_id is not None:
            return self._fresh_event(run, event)
        if isinstance(event, EngineDied) and (said_of == run.request_id or not event.restarting):
            lost = run.job.lost(event.reason, event.crashed, self.environment)
            self._search_answered(lost, go_on=event.restarting)
        return False  # the app reports the lost engine too

    def _search_answered(self, result: SearchResult, go_on: bool = True) -> None:
        """The search's answer, or its loss with the engine process: after a crash under a candidate
        it goes on in a fresh process without it; then the contender runs fresh; else it is shown."""
        run = self._search
        step = run.job.searched(result) if go_on else Done(result)
        label = run.job.config.label()
        if isinstance(step, SearchAgain):
            self._send_search(run)
            self.search_pane.progress(label, step.words)
        elif isinstance(step, RunFresh):  # the contender, pinned, in the process that follows (it retires)
            run.fresh_id = self.scheduler.asked(SEARCH, self.client.submit(step.config, RunOptions()))
            self.search_pane.show(result)
            self.search_pane.progress(label, f"{step.words} ...")
            self._search_said(step.words)
        else:
            self._search_done(step.result)

    def _fresh_event(self, run: SearchShown, event: EngineEvent) -> bool:
        """An event of the fresh run of the contender: its progress, its answer or its loss."""
        said_of = getattr(event, "request_id", None)
        if isinstance(event, EngineProgress) and said_of == run.fresh_id:
            self.search_pane.progress(run.job.config.label(), f"fresh process: {event.text}")
            return True
        if isinstance(event, EngineResult) and said_of == run.fresh_id:
            self._search_done(run.job.fresh_answered(event.result))
            return True
        if isinstance(event, EngineDied) and (said_of == run.fresh_id or not event.restarting):
            self._search_done(run.job.fresh_missing(event.reason))
        return False

    def _search_done(self, result: SearchResult) -> None:
        self._search, self.search_result = None, result
        self.scheduler.answered(SEARCH)
        self.scheduler.end(SEARCH)
        self.search_pane.show(result)
        self.draw_shown()  # the Plans pane's finds  # type: ignore[attr-defined]
        self._search_said("")
        self._form_after_search()

    def stop_search(self) -> None:
        """Esc or Cancel: stop at the next candidate (the answer keeps what was found); a search
        still waiting for the form's run is dropped."""
        run = self._search
        if run is None:
            return
        if run.request_id is not None:
            self.client.cancel()
            words = (
                "stopping the fresh run ..."
                if run.fresh_id is not None
                else "stopping at the next candidate ..."
            )
            self.search_pane.progress(run.job.config.label(), words)
            return
        self._search = None
        self.scheduler.end(SEARCH)
        self.search_pane.say("Not started: stopped (Esc) while the form's run went on.")
        self._search_said("")
        self._form_after_search()

    def on_search_stop_asked(self, _message: SearchStopAsked) -> None:
        with contextlib.suppress(NoMatches):
            self.stop_search()

    def _form_after_search(self) -> None:
        """The form's edits waited: it runs now if it changed (or Ctrl+R asked)."""
        config, _ = self.form.read()
        if self._run_after_search or (
            config is not None and (config, self.live_options(self.form.options)) != self.last_request
        ):
            self._run_after_search = False
            self.action_run()

    async def action_search(self) -> None:
        """The palette's 'Search: start': the Search pane shown, its budget as typed."""
        pane = await self.show_pane(SEARCH_TAB)  # type: ignore[attr-defined]
        if pane is not None:
            with contextlib.suppress(NoMatches):
                self.start_search(pane.budget_text)

    def action_pin_best(self) -> None:
        """The palette's 'Search: pin the best found'."""
        with contextlib.suppress(NoMatches):
            if self.search_result is None or self.search_result.best is None:
                self.notify("No search has found a plan yet (F3: the Search pane).", title="Nothing to pin")
                return
            self.search_pane.action_pin_best()

    def on_best_pinned(self, message: BestPinned) -> None:
        """The best found into the form's pinned plan; the form runs it, and Ctrl+S keeps it."""
        with contextlib.suppress(NoMatches):
            self.query_one("#f-plan", Input).value = message.plan
            current, _ = self.form.read_as_typed()
            other = current is not None and current.replace(plan=None) != message.searched.replace(plan=None)
            words = f"{message.plan} is the form's pinned plan" + (
                f" (found for {message.searched.label()})" if other else ""
            )
            self.notify(f"{words}; Ctrl+S keeps it in a preset.", title="Pinned the best found", markup=False)
