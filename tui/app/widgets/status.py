"""The status line: what the engine is doing now, and the last error.

It has one owner: a small immutable `Status` that renders itself. Handlers replace the state
through its transitions, never the text, so a progress report, a result and a restart arriving
in any order cannot leave a line that mixes two moments.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import Enum

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive

from ...model.fields import FIELD
from ...model.statuses import STATUS_CRASH, STATUS_ERROR, STATUS_KNOWN_ISSUE, STATUS_UNSUPPORTED
from ...present.format import status_word
from .fitted import FittedStatic


class Phase(Enum):
    STARTING = "starting"  # the engine process is loading torch and cuDNN
    IDLE = "idle"  # nothing asked yet: the engine is ready, or a preset was just loaded
    QUEUED = "queued"  # a run was asked for; the engine has said nothing about it yet
    BUILDING = "building"
    CHECKING = "checking"
    TIMING = "timing"  # "timing plan 3 of 6"
    WORKING = "working"  # another step the engine names (validating, scaling)
    DONE = "done"  # a result is on screen
    STALE = "stale"  # the form does not validate: nothing runs, the panes show the last good result
    ERROR = "error"  # the engine process died (or hung) and was restarted


RUNNING = frozenset({Phase.QUEUED, Phase.BUILDING, Phase.CHECKING, Phase.TIMING, Phase.WORKING})
_STEP_PHASES = {"building": Phase.BUILDING, "checking": Phase.CHECKING, "timing": Phase.TIMING}
# a result whose message is the error to show
_REFUSALS = (STATUS_ERROR, STATUS_UNSUPPORTED, STATUS_CRASH, STATUS_KNOWN_ISSUE)
EXPLAIN_HINT = "why: Alt+0 Explain"  # after a refusal: the pane that asks cuDNN who refuses it
ERROR_GAP = "   "  # between what is done now and the error, when they share a row


@dataclass(frozen=True)
class Status:
    """What the line says. `activity` follows the engine; a form that does not validate lays
    `stale_fields` over it (the run in flight still lands, for the last good configuration)."""

    activity: Phase = Phase.STARTING
    label: str = ""  # the configuration queued
    step: str = ""  # the engine's own words for what it does now
    startup_s: float | None = None  # how long the engine process took to be ready
    preset: tuple[str, str] | None = None  # (name, description) of the preset just loaded
    result_status: str = ""  # of the result on screen (STATUS_OK, ...); "" before the first
    wall_s: float = 0.0  # that result's wall time
    refusal: str = ""  # its message, when cuDNN refused it or it failed
    stale_fields: tuple[str, ...] = ()  # the fields to fix before anything runs
    restart_reason: str = ""  # why the engine process was restarted (until the next result)
    no_gpu: str = ""  # why the engine has no GPU
    behind: bool = False  # the panes show an older configuration than the form's: its run was lost
    since: float = field(default=0.0, compare=False)  # when the current step began (monotonic)
    stopped: str = ""  # why the last run was stopped before it finished (Esc)
    sweep: str = ""  # a sweep runs: how far, and that edits to the form wait for its end

    # ---- transitions: every handler goes through one of these ----------------------------
    def ready(self, startup_s: float, no_gpu: str) -> Status:
        """The engine process answered; a run already asked for, or a result, keeps the line."""
        activity = Phase.IDLE if self.activity is Phase.STARTING else self.activity
        return replace(self, activity=activity, startup_s=startup_s, no_gpu=no_gpu)

    def queued(self, label: str) -> Status:
        return replace(
            self, activity=Phase.QUEUED, label=label, step="", preset=None, stale_fields=(),
            since=time.monotonic(), stopped="",
        )  # fmt: skip

    def working(self, step: str) -> Status:
        activity = _STEP_PHASES.get(step.split(" ", 1)[0], Phase.WORKING)
        kind = step.split(":", 1)[0]  # "checking the forward: 40%" is one step as it goes
        since = self.since if kind == self.step.split(":", 1)[0] else time.monotonic()
        return replace(self, activity=activity, step=step, since=since)

    def halted(self, why: str, behind: bool) -> Status:
        """The run was stopped at a step (Esc): nothing new is on screen; the panes may be behind."""
        return replace(
            self, activity=Phase.IDLE, step="", preset=None, stopped=why, behind=self.behind or behind
        )

    def shown(self, result_status: str, message: str, wall_s: float, no_gpu: str) -> Status:
        """A result is on screen: the error is now its own (or none); a restart is history."""
        return replace(
            self,
            activity=Phase.DONE,
            step="",
            preset=None,
            result_status=result_status,
            wall_s=wall_s,
            refusal=message if result_status in _REFUSALS else "",
            restart_reason="",
            no_gpu=no_gpu,
            behind=False,
            stopped="",
        )

    def stale(self, fields: tuple[str, ...]) -> Status:
        return replace(self, stale_fields=tuple(sorted(fields)), preset=None)

    def settled(self) -> Status:
        """The form validates again."""
        return replace(self, stale_fields=())

    def restarted(self, reason: str, lost_run: bool = False) -> Status:
        """The engine process was started afresh; with `lost_run`, the run for what the form
        says went with the old one, so the panes are behind the form until the next result."""
        behind = self.behind or (lost_run and bool(self.result_status))
        return replace(self, activity=Phase.ERROR, restart_reason=reason, step="", preset=None, behind=behind)

    def sweeping(self, words: str) -> Status:
        """A sweep runs (its words lead the line) or has ended (""): the form's own runs wait."""
        return replace(self, sweep=words)

    def preset_loaded(self, name: str, description: str) -> Status:
        return replace(self, activity=Phase.IDLE, preset=(name, description), step="", stopped="")

    # ---- what the user reads -------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return Phase.STALE if self.stale_fields else self.activity

    @property
    def dimmed(self) -> bool:
        """The panes do not show what the form says: a field to fix, or a run that was lost."""
        return self.phase is Phase.STALE or self.behind

    @property
    def error(self) -> str:
        """The last error, most pressing first: the engine's restart, the run's own, no GPU."""
        if self.restart_reason:
            return f"engine restarted: {self.restart_reason}"
        if self.refusal:
            return self.refusal
        if self.no_gpu:
            return f"no GPU: {self.no_gpu}"
        return ""

    @property
    def now(self) -> str:
        phase = self.phase
        if phase is Phase.STALE:
            fix = f"not run: fix {', '.join(FIELD[f].label if f in FIELD else f for f in self.stale_fields)}"
            return f"{fix}; the panes show the last good configuration (stale)" if self.result_status else fix
        if self.sweep:
            return self.sweep
        if phase is Phase.STARTING:
            return "starting the engine process (it loads torch and cuDNN) ..."
        if phase is Phase.IDLE:
            if self.stopped:
                return f"{self.stopped}; Ctrl+R runs it again"
            if self.preset is not None:
                return f"preset {self.preset[0]}: {self.preset[1]}"
            return f"engine ready in {self.startup_s or 0.0:.1f} s"
        if phase is Phase.QUEUED:
            return f"queued {self.label} ..."
        if phase in RUNNING:
            took = time.monotonic() - self.since if self.since else 0.0
            return f"{self.step} ..." + (f" {took:.0f} s" if took >= 1.0 else "")  # a step that lasts says so
        if phase is Phase.DONE:
            hint = f" ({EXPLAIN_HINT})" if self.result_status == STATUS_UNSUPPORTED else ""
            return f"{status_word(self.result_status).lower()} in {self.wall_s:.2f} s{hint}"  # cpu only, not cpu_only
        if self.behind:
            return "the panes show an earlier configuration (stale): Ctrl+R runs the form's"
        return "the form is as you left it; edit or press Ctrl+R to run again"

    def render(self, width: int = 0) -> Text:
        """One line; in `width` cells where the error does not fit beside what is done now, the
        error on a line of its own (cuDNN's words whole, wrapped where they are longer still)."""
        text = Text(self.now)
        error = self.error
        if error:
            apart = 0 < width < cell_len(self.now) + len(ERROR_GAP) + cell_len(error)
            text.append(("\n" if apart else ERROR_GAP) + error, style="bold red")
        return text


class StatusLine(FittedStatic):
    """Renders its `state`; set the state, never the text. While work runs it redraws each second,
    so a step that lasts shows its time. It takes the rows its words need (one, mostly; two at 80
    columns for a refusal or the no-GPU reason beside a step): a repaint, and a layout only when
    its rows change. While a job runs it keeps the most rows the job's words took, so the screen
    under it does not jump at each configuration a hunt or a sweep draws."""

    state: reactive[Status] = reactive(Status, repaint=False)  # watch_state repaints

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)

    def watch_state(self) -> None:
        self.hold(bool(self.state.sweep))  # a job's words lead the line
        self._redraw()

    def _tick(self) -> None:
        if self.state.phase in RUNNING:
            self._redraw()

    def _redraw(self) -> None:
        self.refresh()  # the words measured next are the new ones
        if self._height_may_change():
            self.refresh(layout=True)

    def render(self) -> Text:
        return self.state.render(self.size.width)
