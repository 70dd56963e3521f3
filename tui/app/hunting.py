"""A hunt from the dashboard: tui.jobs.hunt's runs asked of the app's own engine client one at a
time (the client answers only the newest waiting request), as the scheduler lets them, its
findings to the Hunt pane as they come. The same job as the CLI's `hunt`, so the two find the
same things for the same seed.

While a hunt runs the form's edits start nothing (the form runs when it ends, if it changed or
Ctrl+R asked), and no sweep or search starts. Esc (or the pane's Stop) stops it: no more draws,
the run under way stopped at its next step, the shrinking under way ends with what it had. Enter
on a finding puts its minimal configuration into the form.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, cast

from textual.css.query import NoMatches

from ..jobs.scheduler import HUNT, JOB_WORDS
from ..model.config import SEED_MAX
from ..process.client import EngineDied, EngineEvent, EngineProgress, EngineResult
from ..process.session import died_result
from .host import Host
from .messages import HuntAsked, HuntFindingChosen

if TYPE_CHECKING:  # the job's modules are imported when a hunt starts, not with the dashboard
    from ..jobs.hunt import Ask, Hunt, HuntOptions
    from ..jobs.hunt_findings import Finding
    from ..model.results import RunResult
    from .widgets.hunt import HuntPane


def hunt_options(message: HuntAsked) -> tuple[HuntOptions | None, dict[str, str]]:
    """The pane's inputs as HuntOptions, or each bad one's problem by its name."""
    from ..jobs.hunt import HuntOptions
    from ..jobs.hunt_draw import parse_focus
    from ..model.search_results import parse_budget

    errors: dict[str, str] = {}
    budget_s = seed = 0
    focus: tuple[str, ...] = ()
    try:
        budget_s = parse_budget(message.budget)
    except ValueError as exc:
        errors["budget"] = str(exc)
    text = message.seed.strip() or "0"
    if not (text.isascii() and text.isdigit()) or int(text) > SEED_MAX:
        errors["seed"] = f"a seed is a whole number from 0 to 2**63-1 (got {message.seed!r})"
    else:
        seed = int(text)
    try:
        focus = parse_focus(message.focus)
    except ValueError as exc:
        errors["focus"] = str(exc)
    return (None, errors) if errors else (HuntOptions(budget_s, seed, focus), {})


class Hunts:
    """The dashboard's hunts: one at a time, each run through the app's client as the scheduler
    lets it, the findings to the Hunt pane."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.job: Hunt | None = None
        self.ask: Ask | None = None  # the run the job waits for
        self.request_id: int | None = None  # its request, once the engine has it

    @property
    def pane(self) -> HuntPane:
        """The Hunt pane, once made (else NoMatches, as any query)."""
        return cast("HuntPane", self.app.query_one("#hunt"))

    @property
    def running(self) -> bool:
        return self.app.scheduler.running(HUNT)

    def start(self, message: HuntAsked) -> bool:
        """Read the pane's inputs; hunt if they are good and the engine is free of other long
        jobs. Whether it started."""
        pane = self.pane
        if self.job is not None:
            return False
        options, errors = hunt_options(message)
        if options is None:
            pane.show_errors(errors)
            return False
        pane.show_errors({})
        if (other := self.app.scheduler.may_start(HUNT)) is not None:
            pane.say(f"{JOB_WORDS[other]} runs: start the hunt when it ends (Esc stops it).")
            return False
        if self.app.client is None or not self.app.engine_started:
            pane.say("No engine runs here (the dashboard was opened to view a saved result).")
            return False
        from ..jobs.hunt import Hunt

        self.app.cancel_pending_run()
        self.job = Hunt(options, on_finding=self._found)
        pane.begin(self.job)
        self.app.scheduler.begin(HUNT)
        self.ask = self.job.first()
        self.next()
        return True

    def next(self) -> None:
        """Ask for the job's next run once the engine has nothing that goes before it."""
        if self.job is None or self.request_id is not None:
            return
        if self.ask is None:
            self._end()
            return
        if self.app.scheduler.waits_for(HUNT) is not None:
            self._said("waiting for the form's run")
            return
        self.request_id = self.app.scheduler.asked(
            HUNT, self.app.client.submit(self.ask.config, self.ask.options)
        )
        self._said(self.ask.words)

    def event(self, event: EngineEvent) -> bool:
        """An engine event about the hunt's run: whether it was only the hunt's."""
        if self.job is None or self.request_id is None:
            return False
        said_of = getattr(event, "request_id", None)
        if isinstance(event, EngineProgress) and said_of == self.request_id:
            return True  # a run's steps: the pane says what the hunt does, not each step
        if isinstance(event, EngineResult) and said_of == self.request_id:
            self._answered(event.result)
            return True
        if isinstance(event, EngineDied) and (said_of == self.request_id or not event.restarting):
            lost = died_result(self.ask.config, event, "", self.app.environment)  # a crash: an outcome
            if not event.restarting:
                self.job.stop()
            self._answered(lost)
        return False  # the app reports the lost engine too

    def _answered(self, result: RunResult) -> None:
        self.request_id = None
        self.app.scheduler.answered(HUNT)
        self.ask = self.job.answered(result)
        self.next()

    def _found(self, finding: Finding) -> None:
        with contextlib.suppress(NoMatches):
            self.pane.show_finding(finding)

    def _said(self, words: str) -> None:
        with contextlib.suppress(NoMatches):
            self.pane.progress(self.job, words)
        self.app.status.state = self.app.status.state.sweeping(
            f"hunt: {words}; form edits wait for its end (Esc stops it)" if words else ""
        )

    def stop(self) -> None:
        """Esc: no more draws; the run under way stops at its next step."""
        if self.job is None:
            return
        self.job.stop()
        if self.request_id is not None:
            self.app.client.cancel()
        self._said("stopping")

    def _end(self) -> None:
        """The hunt is over: the pane says how; the form runs if it changed meanwhile."""
        job, self.job = self.job, None
        if job is None:
            return
        self.app.scheduler.answered(HUNT)
        run_asked = self.app.scheduler.end(HUNT)
        with contextlib.suppress(NoMatches):
            self.pane.finished(job)
        self.app.status.state = self.app.status.state.sweeping("")
        if job.findings:  # the reproduction script's writer imports the engine's constants: off the UI thread
            self.app.run_worker(lambda: self._bundle(job), thread=True, group="hunt-bundles")
        config, _ = self.app.form.read()
        changed = (
            config is not None
            and (config, self.app.live_options(self.app.form.options)) != self.app.last_request
        )
        if changed or run_asked:
            self.app.action_run()

    def _bundle(self, job: Hunt) -> None:
        """Each finding's bundle, as the CLI writes them; where they went said in a toast."""
        from ..jobs.hunt_findings import default_folder, write_bundle

        folder = default_folder(job.options.seed)
        try:
            for finding in job.findings:
                write_bundle(finding, folder)
        except OSError as exc:
            words, severity = f"The findings' bundles could not be written in {folder}: {exc}", "warning"
        else:
            words, severity = f"{len(job.findings)} finding(s), a bundle each: {folder}", "information"
        self.app.call_from_thread(
            self.app.notify, words, title="Hunt", severity=severity, timeout=30, markup=False
        )

    def chosen(self, message: HuntFindingChosen) -> None:
        """Enter on a finding: its minimal configuration into the form (which then runs it)."""
        with contextlib.suppress(NoMatches):
            self.app.form.load(message.config)
