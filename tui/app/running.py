"""The form's own runs: an edit runs once the typing pauses (unless it is what was last run),
Ctrl+R runs it again, Esc stops it at its next step; its answer goes to the headline and the
panes and into the run history. The engine is the scheduler's to give: while a sweep or a knob
search runs, a run asked for waits for its end."""

from __future__ import annotations

import contextlib
import time

from textual.css.query import NoMatches
from textual.timer import Timer

from ..jobs.scheduler import HUNT, RUN, SEARCH, SWEEP
from ..model.statuses import STATUS_CANCELLED, STATUS_CRASH
from ..process.client import EngineDied, EngineEvent, EngineProgress, EngineResult
from .host import Host
from .messages import ConfigEdited

DEBOUNCE_S = 0.25  # typing "4096" must not start four builds
WAIT_WORDS = {
    SWEEP: ("The form runs when the sweep ends (Esc stops the sweep).", "A sweep runs"),
    SEARCH: ("The form runs when the search ends (Esc stops it).", "A knob search runs"),
    HUNT: ("The form runs when the hunt ends (Esc stops it).", "A hunt runs"),
}


class Runs:
    """The form's run: asked of the app's client as the scheduler lets it, answered in the panes."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self._debounce: Timer | None = None
        self._submitted_at = 0.0
        self.edit_to_result_s: list[tuple[bool, float]] = []  # (cache hit, seconds) of each result shown

    def edited(self, message: ConfigEdited) -> None:
        """The form changed: the status line and the mask say so; a new configuration runs once
        the typing pauses (not while a long job runs: the form runs when it ends)."""
        app = self.app
        self.cancel_pending()
        status = app.status
        if message.config is None:
            status.state = status.state.stale(tuple(message.errors))
            return
        options = app.live_options(message.options)
        app.mask_config = (message.config, options.seed)  # the seed deals a shuffled cache's pages
        app.draw_shown()
        status.state = status.state.settled()
        if (message.config, options) != app.last_request and app.scheduler.job is None:
            self._debounce = app.set_timer(DEBOUNCE_S, self._typing_paused)
            app.scheduler.run_pending = True
        # else: back to what was last run (or the form's own mount): nothing new to measure; or a
        # sweep or a search runs, and the form runs when it ends

    def _typing_paused(self) -> None:
        """Run what the form says, unless it is what was last run (Ctrl+R runs it again)."""
        self._debounce, self.app.scheduler.run_pending = None, False
        with contextlib.suppress(NoMatches):  # a timer firing while the app closes
            form = self.app.form
            config, _ = form.read()
            if config is not None and (config, self.app.live_options(form.options)) == self.app.last_request:
                self.app.explains.next()  # edited and edited back within the pause: nothing runs first
                return
            self.run()

    def cancel_pending(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce, self.app.scheduler.run_pending = None, False

    def run(self) -> None:
        """Run the form's configuration now, or once the long job under way ends."""
        app = self.app
        self.cancel_pending()
        try:
            form = app.form
        except NoMatches:
            return  # the app is closing
        config, errors = form.read()
        if config is None:
            form.show_errors(errors)
            app.status.state = app.status.state.stale(tuple(errors))
            return
        if app.client is None or not app.engine_started:
            return  # asked before the engine started: starting runs the form anyway
        job = app.scheduler.waits_for(RUN)
        if job is not None:  # a run now would take the engine from the sweep, or stop the search
            app.scheduler.run_after = True
            words, title = WAIT_WORDS[job]
            app.notify(words, title=title)
            return
        options = app.live_options(form.options)
        app.last_request = (config, options)
        self._submitted_at = time.perf_counter()
        app.scheduler.asked(RUN, app.client.submit(config, options))
        app.status.state = app.status.state.queued(config.label())

    def stop(self) -> None:
        """Esc: the form's run stops at its next step (between plans, between reference chunks)."""
        if self.app.client is not None and self.app.scheduler.in_flight(RUN) is not None:
            self.app.client.cancel()

    def event(self, event: EngineEvent) -> None:
        """An engine event about the form's run: its words, its answer, or its loss."""
        app = self.app
        status = app.status
        if isinstance(event, EngineProgress):
            if event.request_id == app.scheduler.in_flight(RUN):
                status.state = status.state.working(event.text)
        elif isinstance(event, EngineResult):
            if event.request_id != app.scheduler.in_flight(RUN):
                return  # a configuration the user has already left
            app.scheduler.answered(RUN)
            if event.result.status == STATUS_CANCELLED:  # stopped by Esc: nothing new to show
                behind = app.result is None or app.result.config != event.result.config
                status.state = status.state.halted(event.result.message, behind)
                return
            app.show_result(event.result)
            app.keeper.keep_run(event.result)  # into the run history, off the UI thread
            self.edit_to_result_s.append((event.result.cache_hit, time.perf_counter() - self._submitted_at))
            if event.result.status == STATUS_CRASH:
                app.keep_crash(event.result)
        elif isinstance(event, EngineDied):
            self._died(event)

    def _died(self, event: EngineDied) -> None:
        """The engine process ended: the run under way is lost with it (a request made since goes
        to the next); a toast says why, and where its log is."""
        app = self.app
        lost = event.request_id is not None and event.request_id == app.scheduler.in_flight(RUN)
        if lost:
            app.scheduler.answered(RUN)
        app.status.state = app.status.state.restarted(event.reason, lost_run=lost)
        log = getattr(app.client, "log_file", None)
        where = f" Its output is in {log}." if log else ""
        if not event.restarting:
            words, title = f"{event.reason}. Ctrl+R tries again.{where}", "Engine cannot start"
        elif event.context_lost:
            words, title = f"{event.reason}.", "Engine restarted"
        else:
            words, title = f"{event.reason}. A fresh engine process was started.{where}", "Engine crashed"
        severity = "warning" if event.context_lost else "error"
        app.notify(words, title=title, severity=severity, markup=False)
