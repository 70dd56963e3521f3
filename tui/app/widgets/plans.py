"""Plans: every candidate of each pass with its measurements, a table a pass; the selected
row's details below."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...engine.results import PASS_KINDS, PassResult, PlanResult, RunResult
from ...format import format_bytes, ms, plan_mark, sci, timing_text, us
from ...report import plan_source_short, plan_source_words
from .sections import show_passes

LEGEND = "H: the heuristic's pick   P: pinned   *: fastest measured   from: where the plan comes from   select a row for details"


class PlanTable(DataTable):
    """One pass's candidate plans, a row each, keyed by plan index."""

    def __init__(self, kind: str, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.kind = kind
        self.plans: tuple[PlanResult, ...] = ()
        # what a plan is worth first (80 columns show those), then what it is made of
        self.add_columns(
            "#",
            "",
            "plan",
            "kernel",
            "TFLOPS",
            "max err",
            "from",
            "engine",
            "knobs",
            "workspace",
            "build",
            "notes",
        )

    def show_plans(self, plans: tuple[PlanResult, ...]) -> None:
        self.plans = plans
        self.clear()
        for p in plans:
            mark = plan_mark(p)
            err = Text(sci(p.max_abs_error), style="red" if p.matches is False else "")
            self.add_row(
                str(p.index),
                mark,
                p.name,
                us(p.timing.median_us) if p.timing else "-",
                f"{p.tflops:.1f}" if p.tflops else "-",
                err,
                plan_source_short(p.source),
                "-" if p.engine_id is None else str(p.engine_id),
                " ".join(f"{k}={v}" for k, v in p.knobs.items()),
                "-" if p.workspace_bytes is None else format_bytes(p.workspace_bytes),
                ms(p.build_seconds) if p.built else Text("no", style="red"),
                ", ".join(p.behavior_notes) if p.built else Text(p.build_error, style="red"),
                key=str(p.index),
            )

    def plan(self, index: int | None) -> PlanResult | None:
        return next((p for p in self.plans if p.index == index), None)


def head(p: PassResult) -> Text:
    """A pass's heading: its name, and the autotune verdict or why it has no plan."""
    text = Text(f"{p.kind} plans", style="bold")
    if p.autotune_verdict():
        text.append(f"  autotune: {p.autotune_verdict()}", style="dim")
    elif not p.plans:
        text.append(f"  none: {p.message or '; '.join(p.notes) or 'cuDNN proposed no plan'}", style="dim")
    return text


class PlansPane(Vertical):
    result: RunResult | None = None

    def compose(self) -> ComposeResult:
        for kind in PASS_KINDS:
            yield Static("", id=f"plans-{kind}-head", classes="pass-head")
            yield PlanTable(kind, id=f"plans-{kind}")
        yield Static(LEGEND, id="plan-detail")

    def on_mount(self) -> None:
        show_passes(self, "plans", ())

    def show(self, result: RunResult) -> None:
        self.result = result
        show_passes(self, "plans", tuple(p.kind for p in result.passes))
        for p in result.passes:
            self.query_one(f"#plans-{p.kind}", PlanTable).show_plans(p.plans)
            self.query_one(f"#plans-{p.kind}-head", Static).update(head(p))
        first = result.passes[0] if result.passes else None
        pick = first.plan(first.heuristic_plan) if first else None
        if pick is not None:
            self._detail(pick, first)
        elif not (first and first.plans):
            why = result.message or "no plan was proposed"
            self.query_one("#plan-detail", Static).update(f"no plans: {why}")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # filling a table moves its cursor too: only a user's move (the table has focus) picks a plan
        table = event.data_table
        if not isinstance(table, PlanTable) or not table.has_focus:
            return
        if event.row_key is not None and event.row_key.value is not None:
            plan = table.plan(int(event.row_key.value))
            p = self.result.pass_of(table.kind) if self.result is not None else None
            if plan is not None and p is not None:
                self._detail(plan, p)

    def _detail(self, plan: PlanResult, p: PassResult) -> None:
        lines = [
            f"{p.kind} plan {plan.index}: {plan.name}"
            + ("  (heuristic's pick)" if plan.is_heuristic_pick else "")
            + ("  (pinned)" if plan.is_pinned else "")
            + ("  (fastest)" if plan.is_fastest else "")
        ]
        workspace = "-" if plan.workspace_bytes is None else format_bytes(plan.workspace_bytes)
        lines.append(f"from {plan_source_short(plan.source)}: {plan_source_words(plan.source)}")
        lines.append(f"engine {plan.engine_id}  knobs {plan.knobs or '{}'}  workspace {workspace}")
        if plan.built:
            lines.append(f"built in {ms(plan.build_seconds)}; kernel time {timing_text(plan.timing)}")
            if plan.timing:
                lines.append(
                    f"{plan.timing.replays} replays of {plan.timing.per_replay} executions, "
                    f"{plan.timing.kernels_per_call} kernel(s) per call, {plan.timing.method}"
                )
            if plan.max_abs_error is not None:
                of = f" (worst of {', '.join(c.output for c in p.checks)})" if len(p.checks) > 1 else ""
                within = "within" if plan.matches else "OUTSIDE"
                lines.append(f"max abs error {plan.max_abs_error:.3e}{of}: {within} tolerance")
            lines.append("behavior notes: " + (", ".join(plan.behavior_notes) or "none"))
        else:
            lines.append(f"does not build: {plan.build_error}")
        self.query_one("#plan-detail", Static).update("\n".join(lines))
