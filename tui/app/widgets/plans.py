"""Plans: every candidate with its measurements, the forward's and (for a training step) the
backward's; the selected row's details below."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...engine.config import format_bytes
from ...engine.results import PlanResult, RunResult, autotune_verdict
from ...report import ms, sci, timing_text, us
from .sections import show_backward

LEGEND = "H: the heuristic's pick   *: fastest measured   select a row for details"


class PlanTable(DataTable):
    """One graph's candidate plans, a row each, keyed by plan index."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.plans: tuple[PlanResult, ...] = ()
        self.add_columns(
            "#", "", "plan", "engine", "knobs", "workspace", "build", "kernel", "TFLOPS", "max err", "notes"
        )

    def show_plans(self, plans: tuple[PlanResult, ...]) -> None:
        self.plans = plans
        self.clear()
        for p in plans:
            mark = ("H" if p.is_heuristic_pick else "") + ("*" if p.is_fastest else "")
            err = Text(sci(p.max_abs_error), style="red" if p.matches is False else "")
            self.add_row(
                str(p.index),
                mark,
                p.name,
                "-" if p.engine_id is None else str(p.engine_id),
                " ".join(f"{k}={v}" for k, v in p.knobs.items()),
                "-" if p.workspace_bytes is None else format_bytes(p.workspace_bytes),
                ms(p.build_seconds) if p.built else Text("no", style="red"),
                us(p.timing.median_us) if p.timing else "-",
                f"{p.tflops:.1f}" if p.tflops else "-",
                err,
                ", ".join(p.behavior_notes) if p.built else Text(p.build_error, style="red"),
                key=str(p.index),
            )

    def plan(self, index: int | None) -> PlanResult | None:
        return next((p for p in self.plans if p.index == index), None)


class PlansPane(Vertical):
    def compose(self) -> ComposeResult:
        yield PlanTable(id="plans-table")
        yield Static("", id="backward-plans-head")
        yield PlanTable(id="backward-plans-table")
        yield Static(LEGEND, id="plan-detail")

    def on_mount(self) -> None:
        show_backward(self, False, "backward-plans-head", "backward-plans-table")

    def show(self, result: RunResult) -> None:
        self.query_one("#plans-table", PlanTable).show_plans(result.plans)
        b = result.backward
        show_backward(self, b is not None, "backward-plans-head", "backward-plans-table")
        if b is not None:
            self.query_one("#backward-plans-table", PlanTable).show_plans(b.plans)
            head = Text("backward plans", style="bold")
            verdict = autotune_verdict(b.plans, b.heuristic_plan, b.fastest_plan)
            if verdict:
                head.append(f"  autotune: {verdict}", style="dim")
            elif not b.plans:
                head.append(f"  none: {b.message or b.note or 'cuDNN proposed no plan'}", style="dim")
            self.query_one("#backward-plans-head", Static).update(head)
        pick = result.plan(result.heuristic_plan)
        if pick is not None:
            self._detail(pick)
        elif not result.plans:
            why = result.message or "no plan was proposed"
            self.query_one("#plan-detail", Static).update(f"no plans: {why}")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # filling a table moves its cursor too: only a user's move (the table has focus) picks a plan
        table = event.data_table
        if not isinstance(table, PlanTable) or not table.has_focus:
            return
        if event.row_key is not None and event.row_key.value is not None:
            plan = table.plan(int(event.row_key.value))
            if plan is not None:
                self._detail(plan, backward=table.id == "backward-plans-table")

    def _detail(self, p: PlanResult, backward: bool = False) -> None:
        what = "backward plan" if backward else "plan"
        lines = [
            f"{what} {p.index}: {p.name}"
            + ("  (heuristic's pick)" if p.is_heuristic_pick else "")
            + ("  (fastest)" if p.is_fastest else "")
        ]
        lines.append(
            f"engine {p.engine_id}  knobs {p.knobs or '{}'}  workspace "
            f"{'-' if p.workspace_bytes is None else format_bytes(p.workspace_bytes)}"
        )
        if p.built:
            lines.append(f"built in {ms(p.build_seconds)}; kernel time {timing_text(p.timing)}")
            if p.timing:
                lines.append(
                    f"{p.timing.replays} replays of {p.timing.per_replay} executions, "
                    f"{p.timing.kernels_per_call} kernel(s) per call, {p.timing.method}"
                )
            if p.max_abs_error is not None:
                of = " (worst of dQ, dK, dV)" if backward else ""
                lines.append(
                    f"max abs error {p.max_abs_error:.3e}{of}: "
                    f"{'within' if p.matches else 'OUTSIDE'} tolerance"
                )
            lines.append("behavior notes: " + (", ".join(p.behavior_notes) or "none"))
        else:
            lines.append(f"does not build: {p.build_error}")
        self.query_one("#plan-detail", Static).update("\n".join(lines))
