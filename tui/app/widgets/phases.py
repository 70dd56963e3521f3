"""Build phases: each phase's time as a table and a bar, the total, and cache hits."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...engine.results import RunResult
from ...report import ms

BAR_WIDTH = 24


class PhasesPane(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("", id="phases-head")
        table = DataTable(id="phases-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("phase", "time", "", "what it does here")
        yield table

    def show(self, result: RunResult) -> None:
        table = self.query_one(DataTable)
        table.clear()
        total = sum(p.seconds for p in result.phases)
        longest = max((p.seconds for p in result.phases), default=0) or 1
        for p in result.phases:
            bar = Text("█" * max(1 if p.seconds > 0 else 0, round(BAR_WIDTH * p.seconds / longest)),
                       style="green" if p.ok else "red")
            table.add_row(p.name, ms(p.seconds), bar, p.note if p.ok else Text(p.error, style="red"))
        head = f"total {ms(total)}"
        if result.cache_hit:
            head += " — cache hit: this configuration was built earlier; no phase ran now"
        self.query_one("#phases-head", Static).update(head)
