"""A sweep from the dashboard: the form's configuration and timing at every point of a grid, run
through the app's own engine client one point at a time (the client answers only the newest
waiting request, so a second point waiting would drop the first). Each finished point is a row
made by tui.jobs.sweep.point_row, as the CLI's `sweep` makes it, and goes to the Sweep pane only: the
other panes keep the form's own result.

While a sweep runs the form's edits do not start runs (a run would take the engine from the
sweep): the form runs when the sweep ends, if it changed or Ctrl+R asked. Esc stops the sweep
after the point under way, keeping it; Esc again stops that point too. The grid's code
(tui.jobs.sweep and what it needs) is imported when a sweep is first asked for, not with the
dashboard's first frame.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from ..jobs.scheduler import JOB_WORDS, SWEEP
from ..model.config import SdpaConfig
from ..model.results import RunResult
from ..model.statuses import STATUS_CANCELLED, STATUS_CRASH
from ..process.client import EngineDied, EngineEvent, EngineProgress, EngineResult
from . import sweep_progress
from .host import Host
from .sweep_progress import Progress

if TYPE_CHECKING:
    from ..jobs.sweep import Point, Vary
    from ..jobs.sweep_run import SweepRun
    from .widgets.sweep import SweepPane

NO_VARY = "give FIELD=VALUES, e.g. s=1024..32768x2 or d=64,128"


def plan_sweep(texts: tuple[str, ...], base: SdpaConfig) -> tuple[list[Vary], list[Point], dict[int, str]]:
    """The varies typed (empty inputs left out), their grid over `base`, and each bad input's
    problem by its place from 1 (then nothing runs). A problem of the grid as a whole (one field
    varied twice, too many points) goes under the last vary given."""
    from ..jobs.sweep import SweepError, grid, parse_vary

    varies, errors, given = [], {}, []
    for place, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        given.append(place)
        try:
            varies.append(parse_vary(text, base))
        except SweepError as exc:
            errors[place] = str(exc)
    if not given:
        return [], [], {1: f"vary: {NO_VARY}"}
    if errors:
        return varies, [], errors
    try:
        return varies, grid(base, varies), {}
    except SweepError as exc:
        return varies, [], {given[-1]: str(exc)}


@dataclass
class SweepShown:
    """The dashboard's side of a sweep under way (jobs/sweep_run.py's SweepRun): how far the pane
    was told, and the point the engine has with its request (None between points)."""

    run: SweepRun
    progress: Progress
    point: Point | None = None
    request_id: int | None = None


class Sweeps:
    """The dashboard's sweeps: one at a time, its points through the app's client as the
    scheduler lets them, its rows to the Sweep pane."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.shown: SweepShown | None = None

    @property
    def pane(self) -> SweepPane:
        """The Sweep pane, once made (else NoMatches, as any query)."""
        return cast("SweepPane", self.app.query_one("#sweep"))

    @property
    def running(self) -> bool:
        return self.app.scheduler.running(SWEEP)

    def start(self, texts: tuple[str, ...]) -> bool:
        """Read the varies against the form's configuration; run the grid if they and the form are
        good (the form's run options, as its own runs take them). Whether it started."""
        pane = self.pane
        if self.shown is not None:
            return False
        if (other := self.app.scheduler.may_start(SWEEP)) is not None:
            pane.show_errors(
                {1: f"{JOB_WORDS[other].lower()} runs: start the sweep when it ends (Esc stops it)"}
            )
            return False
        config, errors = self.app.form.read()
        if config is None:
            pane.show_errors({1: f"the form does not validate: fix {', '.join(sorted(errors))} first"})
            return False
        if self.app.client is None or not self.app.engine_started:
            pane.show_errors({1: "no engine runs here (the dashboard was opened to view a saved result)"})
            return False
        varies, points, problems = plan_sweep(texts, config)
        if problems:
            pane.show_errors(problems)
            return False
        from ..jobs.sweep_run import SweepRun

        self.app.cancel_pending_run()
        first = varies[0].label
        xs = list(dict.fromkeys(str(p.varied[first]) for p in points))
        pane.begin([v.label for v in varies], xs, len(points), self.app.no_gpu_reason())
        self.shown = SweepShown(SweepRun(points, self.app.live_options(self.app.form.options)), pane.progress)
        self.app.scheduler.begin(SWEEP)
        self.next()
        return True

    def next(self) -> None:
        """Ask for the next point once the engine has nothing of ours: not while a point or the
        form's own run (asked before the sweep) is under way."""
        shown = self.shown
        if shown is None or shown.request_id is not None:
            return
        if shown.progress.stopping or shown.run.all_handed_out:
            self._end("done" if shown.run.all_handed_out else "stopped (Esc)")
            return
        if self.app.scheduler.waits_for(SWEEP) is not None:
            self._said(waiting=True)
            return
        from ..jobs.sweep import varied_words

        point = shown.point = shown.run.take()
        shown.request_id = self.app.scheduler.asked(
            SWEEP, self.app.client.submit(point.config, shown.run.options)
        )
        self._said(waiting=False, running=varied_words(point.varied), step="queued")

    def event(self, event: EngineEvent) -> bool:
        """An engine event about the point under way: whether it was only the sweep's."""
        shown = self.shown
        if (
            shown is None
            or shown.request_id is None
            or getattr(event, "request_id", None) != shown.request_id
        ):
            return False
        if isinstance(event, EngineProgress):
            self._said(step=event.text)
            return True
        if isinstance(event, EngineResult):
            self._point(event.result)
            if event.result.status == STATUS_CRASH:  # a finding: its script is kept, as a form run's is
                self.app.keep_crash(event.result)
            return True
        if isinstance(event, EngineDied):  # the point went with the process: a row that says so
            from ..process.session import died_result

            lost = died_result(shown.point.config, event, "", self.app.environment)
            self._point(lost, go_on=event.restarting)
            if not event.restarting:
                self._end(f"stopped: the engine cannot start ({event.reason})")
        return False  # the app reports the lost engine too

    def _point(self, result: RunResult, go_on: bool = True) -> None:
        """A point's answer: its row, then the next point (unless the engine is left down)."""
        shown = self.shown
        shown.request_id = None
        self.app.scheduler.answered(SWEEP)
        if result.status == STATUS_CANCELLED:  # Esc twice: the point was stopped, nothing to keep
            self._end("stopped (Esc twice): the point under way was dropped")
            return
        self.pane.add_row(shown.run.answered(shown.point, result))
        self._said(running="", step="")
        if go_on:
            self.next()

    def _said(self, **changes) -> None:
        """The pane's and the app's status lines say how far the sweep is."""
        shown = self.shown
        shown.progress = replace(shown.progress, done=len(shown.run.rows), **changes)
        self.pane.say(shown.progress)
        self.app.status.state = self.app.status.state.sweeping(shown.progress.short())

    def stop(self) -> None:
        """Esc: stop after the point under way (kept); again: stop that point at its next step."""
        shown = self.shown
        if shown is None:
            return
        if shown.progress.stopping and shown.request_id is not None:
            self.app.client.cancel()
            return
        shown.run.stop()
        self._said(stopping=True)
        if shown.request_id is None:  # between points (waiting for the form's run): nothing to finish
            self.next()

    def _end(self, how: str) -> None:
        """The sweep is over: the pane says how; the form runs if it changed meanwhile (or Ctrl+R
        asked), since its edits waited."""
        shown, self.shown = self.shown, None
        if shown is None:
            return
        self.app.scheduler.answered(SWEEP)
        run_asked = self.app.scheduler.end(SWEEP)
        progress = replace(
            shown.progress, done=len(shown.run.rows), finished=how, ended=sweep_progress.clock()
        )
        self.pane.say(progress)
        self.app.status.state = self.app.status.state.sweeping("")
        config, _ = self.app.form.read()
        changed = (
            config is not None
            and (config, self.app.live_options(self.app.form.options)) != self.app.last_request
        )
        if changed or run_asked:
            self.app.action_run()
