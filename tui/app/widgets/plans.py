"""Plans: every candidate of each pass with its measurements, a table a pass; the selected
row's details below. After a knob search of the configuration shown, the fastest candidates it
found that passed the check follow the forward's own plans, marked S (its figures are the
search's, in the burst regime)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...model.knob_search import SEARCHED, Trial
from ...model.pins import Pin
from ...model.results import PassResult, PlanResult, RunResult
from ...model.search_results import SearchResult
from ...model.statuses import PASS_KINDS
from ...present.format import format_bytes, ms, plan_mark, sci, timing_text, us
from .fitted import FittedStatic, FittingTable
from .sections import show_passes

LEGEND = "H: the heuristic's pick   P: pinned   *: fastest measured   from: where the plan comes from   select a row for details"
FOUND_MARK, FOUND_LEGEND = "S", "S: found by the knob search"
FOUND_ROWS = 12  # the search's fastest, at most


def found_plans(search: SearchResult | None, p: PassResult, result: RunResult) -> tuple[Trial, ...]:
    """The candidates a knob search of this configuration (its pinned plan aside) found beyond the
    pass's own plans that passed the check, fastest first, with the confirmation's figures where
    they were timed again: for the forward only, the pass a search searches."""
    if (
        search is None
        or p.kind != PASS_KINDS[0]
        or search.config.replace(plan=None) != result.config.replace(plan=None)
    ):
        return ()
    shown = {Pin.of(x.engine_id, x.knobs).text() for x in p.plans if x.engine_id is not None}
    timed = {t.plan: t for t in (*search.trials, *search.confirmed) if t.origin == SEARCHED}
    found = sorted(
        (t for t in timed.values() if t.passed and t.plan not in shown), key=lambda t: t.time_us or 0
    )
    return tuple(found[:FOUND_ROWS])


class PlanTable(FittingTable):
    """One pass's candidate plans, a row each, keyed by plan index; where the pane is narrow, the
    columns of what a plan is made of go (its details below say them), notes first."""

    DROPS = ("notes", "build", "workspace", "knobs", "engine", "from")

    def __init__(self, kind: str, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.kind = kind
        self.plans: tuple[PlanResult, ...] = ()
        self.found: tuple[Trial, ...] = ()  # the knob search's candidates after the plans (S rows)
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

    def show_plans(
        self, plans: tuple[PlanResult, ...], found: tuple[Trial, ...] = (), flops: int = 0
    ) -> None:
        from ...present.report import plan_source_short  # the report's words, imported with the first result

        self.plans, self.found = plans, found
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
        for i, t in enumerate(found):
            pin = t.pin  # a searched candidate is named by its pin
            self.add_row(
                "", FOUND_MARK, t.name or "-", us(t.time_us), f"{flops / t.time_us / 1e6:.1f}" if flops and t.time_us else "-",
                sci(t.max_abs_error), "search", str(pin.engine_id), " ".join(f"{k}={v}" for k, v in pin.knobs),
                "-", "-", "timed by the knob search", key=f"{FOUND_MARK}{i}",
            )  # fmt: skip

    def trial(self, key: str) -> Trial | None:
        """The search's candidate of an S row."""
        i = int(key[len(FOUND_MARK) :]) if key.startswith(FOUND_MARK) else -1
        return self.found[i] if 0 <= i < len(self.found) else None

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
    search: SearchResult | None = None  # the last knob search: its finds follow the forward's plans

    def compose(self) -> ComposeResult:
        for kind in PASS_KINDS:
            yield FittedStatic("", id=f"plans-{kind}-head", classes="pass-head")
            yield PlanTable(kind, id=f"plans-{kind}")
        yield FittedStatic(LEGEND, id="plan-detail")

    def on_mount(self) -> None:
        show_passes(self, "plans", ())

    def show(self, result: RunResult, search: SearchResult | None = None) -> None:
        """The result's plans; the last knob search's finds follow them where it searched the
        configuration shown."""
        self.result, self.search = result, search
        show_passes(self, "plans", tuple(p.kind for p in result.passes))
        for p in result.passes:
            found = found_plans(self.search, p, result)
            self.query_one(f"#plans-{p.kind}", PlanTable).show_plans(p.plans, found, p.flops)
            words = head(p)
            if found:
                words.append(f"  {FOUND_LEGEND} (its {len(found)} fastest that passed)", style="dim")
            self.query_one(f"#plans-{p.kind}-head", Static).update(words)
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
        found = table.trial(event.row_key.value or "") if event.row_key is not None else None
        if found is not None:
            self.query_one("#plan-detail", Static).update(found_detail(found))
        elif event.row_key is not None and event.row_key.value is not None:
            plan = table.plan(int(event.row_key.value))
            p = self.result.pass_of(table.kind) if self.result is not None else None
            if plan is not None and p is not None:
                self._detail(plan, p)

    def _detail(self, plan: PlanResult, p: PassResult) -> None:
        from ...present.report import plan_source_short, plan_source_words

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


def found_detail(t: Trial) -> str:
    """An S row's details: what the search measured of it, and how to keep it."""
    error = "-" if t.max_abs_error is None else f"{t.max_abs_error:.3e}"
    return "\n".join([
        f"forward plan {t.plan}: {t.name or '-'}  ({FOUND_LEGEND})",
        f"kernel time {us(t.time_us)} (p10 {us(t.p10_us)}, p90 {us(t.p90_us)}) as the search timed it, "
        f"max abs error {error}: within tolerance",
        "the Search pane's Pin best (p) pins the best found into the form; typing this plan in the form's "
        "pinned plan runs it",
    ])  # fmt: skip
