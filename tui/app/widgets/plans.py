"""Plans: every candidate with its measurements; the selected row's details below."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...engine.config import format_bytes
from ...engine.results import PlanResult, RunResult
from ...report import ms, sci, timing_text, us


class PlansPane(Vertical):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._plans: tuple[PlanResult, ...] = ()

    def compose(self) -> ComposeResult:
        table = DataTable(id="plans-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("#", "", "plan", "engine", "knobs", "workspace", "build", "kernel", "TFLOPS", "max err", "notes")
        yield table
        yield Static("H: the heuristic's pick   *: fastest measured   select a row for details", id="plan-detail")

    def show(self, result: RunResult) -> None:
        self._plans = result.plans
        table = self.query_one(DataTable)
        table.clear()
        for p in result.plans:
            mark = ("H" if p.is_heuristic_pick else "") + ("*" if p.is_fastest else "")
            err = Text(sci(p.max_abs_error), style="red" if p.matches is False else "")
            table.add_row(
                str(p.index), mark, p.name, "-" if p.engine_id is None else str(p.engine_id),
                " ".join(f"{k}={v}" for k, v in p.knobs.items()),
                "-" if p.workspace_bytes is None else format_bytes(p.workspace_bytes),
                ms(p.build_seconds) if p.built else Text("no", style="red"),
                us(p.timing.median_us) if p.timing else "-",
                f"{p.tflops:.1f}" if p.tflops else "-",
                err,
                ", ".join(p.behavior_notes) if p.built else Text(p.build_error, style="red"),
                key=str(p.index),
            )
        if result.heuristic_plan is not None:
            self._detail(result.plans[result.heuristic_plan])
        elif not result.plans:
            why = result.message or "no plan was proposed"
            self.query_one("#plan-detail", Static).update(f"no plans: {why}")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            index = int(event.row_key.value)
            plan = next((p for p in self._plans if p.index == index), None)
            if plan is not None:
                self._detail(plan)

    def _detail(self, p: PlanResult) -> None:
        lines = [f"plan {p.index}: {p.name}" + ("  (heuristic's pick)" if p.is_heuristic_pick else "")
                 + ("  (fastest)" if p.is_fastest else "")]
        lines.append(f"engine {p.engine_id}  knobs {p.knobs or '{}'}  workspace "
                     f"{'-' if p.workspace_bytes is None else format_bytes(p.workspace_bytes)}")
        if p.built:
            lines.append(f"built in {ms(p.build_seconds)}; kernel time {timing_text(p.timing)}")
            if p.timing:
                lines.append(f"{p.timing.replays} replays of {p.timing.per_replay} executions, "
                             f"{p.timing.kernels_per_call} kernel(s) per call, {p.timing.method}")
            if p.max_abs_error is not None:
                lines.append(f"max abs error {p.max_abs_error:.3e}: {'within' if p.matches else 'OUTSIDE'} tolerance")
            lines.append("behavior notes: " + (", ".join(p.behavior_notes) or "none"))
        else:
            lines.append(f"does not build: {p.build_error}")
        self.query_one("#plan-detail", Static).update("\n".join(lines))
