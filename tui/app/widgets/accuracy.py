"""Accuracy: cuDNN's error against the fp32 reference, with torch's own beside it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...engine.results import ErrorMetrics, RunResult
from ...report import sci


class AccuracyPane(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("", id="accuracy-head")
        table = DataTable(id="accuracy-table", cursor_type="none")
        table.add_columns("output", "max abs", "max rel", "mean abs", "non-finite", "verdict")
        yield table

    def show(self, result: RunResult) -> None:
        acc = result.accuracy
        table = self.query_one(DataTable)
        table.clear()
        head = self.query_one("#accuracy-head", Static)
        if acc is None:
            head.update("not checked")
            return
        head.update(f"reference: {acc.reference}, on {acc.device}\n"
                    f"tolerance ({result.config.dtype}): atol {acc.atol:g}, rtol {acc.rtol:g}"
                    + (f"\n{acc.note}" if acc.note else ""))
        self._row(table, "cuDNN", acc.cudnn)
        self._row(table, f"torch {result.config.dtype} SDPA", acc.torch_lowp)

    @staticmethod
    def _row(table: DataTable, who: str, m: ErrorMetrics | None) -> None:
        if m is None:
            table.add_row(who, "-", "-", "-", "-", Text("not run", style="dim"))
            return
        ok = m.mismatched == 0 and m.nonfinite == 0
        verdict = Text("pass", style="bold green") if ok else Text(f"FAIL ({m.mismatched}/{m.total})", style="bold red")
        table.add_row(who, sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs), str(m.nonfinite), verdict)
