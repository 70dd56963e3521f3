"""Build phases: each phase's time as a table and a bar, the total, and cache hits; for a
training step the backward graph's phases too, since it is built separately."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...engine.results import PhaseTiming, RunResult
from ...report import ms
from .sections import show_backward

BAR_WIDTH = 24


class PhaseTable(DataTable):
    """One graph's build phases, each with a bar scaled to the longest."""

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
        yield Static("", id="phases-head")
        yield PhaseTable(id="phases-table")
        yield Static("", id="backward-phases-head")
        yield PhaseTable(id="backward-phases-table")

    def on_mount(self) -> None:
        show_backward(self, False, "backward-phases-head", "backward-phases-table")

    def show(self, result: RunResult) -> None:
        self.query_one("#phases-table", PhaseTable).show_phases(result.phases)
        b = result.backward
        head = total(result.phases)
        if b is not None:
            head = f"forward graph: {head}"
        if result.cache_hit:
            head += " — cache hit: this configuration was built earlier; no phase ran now"
        self.query_one("#phases-head", Static).update(head)
        show_backward(self, b is not None, "backward-phases-head", "backward-phases-table")
        if b is not None:
            self.query_one("#backward-phases-table", PhaseTable).show_phases(b.phases)
            both = sum(p.seconds for p in (*result.phases, *b.phases))
            self.query_one("#backward-phases-head", Static).update(
                f"backward graph: {total(b.phases)}   (forward and backward: {ms(both)})"
            )
