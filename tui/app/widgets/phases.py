"""Build phases: each phase's time as a table and a bar, the total, and cache hits; a table a
pass, since each pass builds its own graph."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ...model.results import PhaseTiming, RunResult
from ...model.statuses import PASS_KINDS
from ...present.format import ms
from .fitted import FittedStatic, FittingTable
from .sections import show_passes

BAR_WIDTH = 24


class PhaseTable(FittingTable):
    """One graph's build phases, each with a bar scaled to the longest; a narrow pane leaves out
    what each does, then the bars."""

    DROPS = ("what it does here", "")

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.add_columns("phase", "time", "", "what it does here")

    def show_phases(self, phases: tuple[PhaseTiming, ...]) -> None:
        self.clear()
        longest = max((p.seconds for p in phases), default=0) or 1
        for p in phases:
            bar = Text(
                "█" * max(1 if p.seconds > 0 else 0, round(BAR_WIDTH * p.seconds / longest)),
                style="green" if p.ok else "red",
            )
            self.add_row(p.name, ms(p.seconds), bar, p.note if p.ok else Text(p.error, style="red"))


def total(phases: tuple[PhaseTiming, ...]) -> str:
    return f"total {ms(sum(p.seconds for p in phases))}"


class PhasesPane(Vertical):
    def compose(self) -> ComposeResult:
        for kind in PASS_KINDS:
            yield FittedStatic("", id=f"phases-{kind}-head", classes="pass-head")
            yield PhaseTable(id=f"phases-{kind}")

    def on_mount(self) -> None:
        show_passes(self, "phases", (), lone_head=True)

    def show(self, result: RunResult) -> None:
        show_passes(self, "phases", tuple(p.kind for p in result.passes), lone_head=True)
        for i, p in enumerate(result.passes):
            self.query_one(f"#phases-{p.kind}", PhaseTable).show_phases(p.phases)
            head = f"{p.kind} graph: {total(p.phases)}"
            if i == 0 and result.cache_hit:
                head += " — cache hit: this configuration was built earlier; no phase ran now"
            if i == len(result.passes) - 1 and i > 0:
                every = sum(ph.seconds for q in result.passes for ph in q.phases)
                head += f"   (every pass: {ms(every)})"
            self.query_one(f"#phases-{p.kind}-head", Static).update(head)
        if not result.passes:
            self.query_one(f"#phases-{PASS_KINDS[0]}", PhaseTable).show_phases(())
            self.query_one(f"#phases-{PASS_KINDS[0]}-head", Static).update(
                result.message or "no graph was built"
            )
