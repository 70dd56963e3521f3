"""Latency: each pass's kernel time of every run since the app started, and per plan now (a bar
and its figure a row); below, how the current figures were taken: every sample of every plan (a
strip a plan, so two clusters show), and the GPU around the heuristic's measurement of each pass
(clocks, power against the limit, temperature, throttle reasons, capped shares, the rest wait,
the L2 flush, cross-check). A result that timed nothing shows only why, without empty charts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ...model.results import PassResult, PlanResult, RunResult
from ...present.format import (
    gpu_rows,
    l2_words,
    no_telemetry_words,
    no_timing_words,
    pass_short,
    plan_mark,
    sample_rows,
    us,
)
from .fitted import FittedStatic

if TYPE_CHECKING:
    from ..latency_history import LatencyHistory

MIN_CHART_ROWS = 10  # below this a chart's ticks crowd out its data (app.tcss: .latency-row)


def plan_label(p: PlanResult, prefix: str = "") -> str:
    return f"{prefix}{p.index}{plan_mark(p)} {p.name}"


def strip_label(p: PlanResult, prefix: str = "") -> str:
    """A plan's row of the samples strip: its number and marks as in the chart above (the names
    are there), '!' where its figure was unstable."""
    unstable = p.timing is not None and p.timing.stable is False
    return f"{prefix}{plan_label(p).split()[0]}{'!' if unstable else ''}"


def off_median(samples: tuple[float, ...], median: float) -> list[float]:
    """Each sample as % away from the plan's median: plans of any speed share one axis."""
    return [100.0 * (s / median - 1.0) for s in samples] if median else []


def measurement_rows(result: RunResult | None) -> Group:
    """The GPU around each pass's figure (the heuristic's plan's measurement), a grid of rows a
    pass; where NVML was not read, one line says why."""
    if result is None:
        return Group()
    timed = [p for p in result.passes if p.timing is not None]
    if not timed:
        return Group(Text(no_timing_words(result), style="dim"))
    return Group(*(block for p in timed for block in pass_blocks(p, result)))


def pass_blocks(p: PassResult, result: RunResult) -> list[RenderableType]:
    t = p.timing
    pick = p.plan(p.heuristic_plan)
    head = Text(p.kind, style="bold")
    head.append(f" {us(t.median_us)}, {t.regime or 'regime not recorded'}", style="bold cyan")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    if pick is not None:
        grid.add_row("plan", f"{pick.index} {pick.name} (H)")
    for name, value in sample_rows(t):
        grid.add_row(name, Text(value, style="bold yellow" if "UNSTABLE" in value else ""))
    blocks: list[RenderableType] = [head, grid]
    if t.telemetry is None:
        blocks.append(Text(no_telemetry_words(result.environment), style="dim"))
    else:
        for name, value in gpu_rows(t.telemetry):
            capped = name == "capped" and t.telemetry.capped_words
            grid.add_row(name, Text(value, style="bold yellow" if capped or "NOT rested" in value else ""))
    grid.add_row("L2", l2_words(t))
    if t.cross_check:
        blocks.append(Text(t.cross_check, style="yellow"))
    return blocks


PASS_STYLES = ("cyan", "magenta")  # the bars of the first pass, of a later one


class PlanBars:
    """Each timed plan's kernel time as a bar, a row each: its label, the bar scaled to the
    slowest within the width it is given, and its figure; the bars never reach the next label."""

    def __init__(self, rows: list[tuple[str, float, str]]) -> None:
        self.rows = rows  # label, µs, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text("kernel time per plan", style="bold")
        if not self.rows:
            return
        label_w = max(cell_len(label) for label, _, _ in self.rows)
        figures = [us(t) for _, t, _ in self.rows]
        figure_w = max(cell_len(f) for f in figures)
        room = max(1, options.max_width - label_w - figure_w - 2)
        slowest = max(t for _, t, _ in self.rows) or 1.0
        for (label, t, style), figure in zip(self.rows, figures, strict=True):
            filled = max(1, round(room * t / slowest))
            yield Text.assemble(
                label.rjust(label_w),
                " ",
                ("█" * filled, style),
                " " * (room - filled + 1),
                figure.rjust(figure_w),
            )
        yield Text("H the pick, P pinned, * fastest", style="dim")


def plan_bars(result: RunResult | None) -> PlanBars:
    groups = timed_groups(result)
    return PlanBars([
        (plan_label(p, pass_prefix(kind, groups)), p.timing.median_us, PASS_STYLES[min(i, 1)])
        for i, (kind, plans) in enumerate(groups)
        for p in plans
    ])  # fmt: skip


def run_ticks(runs: list[int], most: int = 6) -> list[int]:
    """Whole run numbers for the axis, at most `most` of them, the first and the last among them."""
    step = max(1, -(-(runs[-1] - runs[0]) // (most - 1)))
    return sorted({*range(runs[0], runs[-1], step), runs[-1]})


class LatencyPane(VerticalScroll):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: dict[str, list[tuple[int, float]]] = {}  # as drawn: pass kind -> (run, µs)
        self.strips: dict[str, list[float]] = {}  # strip label -> its samples, % off the plan's median

    def compose(self) -> ComposeResult:
        with Horizontal(classes="latency-row", id="latency-charts"):
            yield PlotextPlot(id="latency-history")
            with VerticalScroll(id="latency-plans-box"):
                yield FittedStatic(id="latency-plans")
        with Horizontal(classes="latency-row", id="latency-detail"):
            yield PlotextPlot(id="latency-samples")
            with VerticalScroll(id="latency-gpu-box"):
                yield FittedStatic(id="latency-gpu")

    def on_mount(self) -> None:
        self._draw_history()
        self._draw_plans(None)
        self._draw_samples(None)

    def show(self, result: RunResult, history: LatencyHistory) -> None:
        """The result now, and the kernel times of every run so far (the result's among them)."""
        self.history = {kind: list(points) for kind, points in history.points.items()}
        self._draw_history()
        self._draw_plans(result)
        self._draw_samples(result)
        self.query_one("#latency-gpu", Static).update(measurement_rows(result))
        self.set_class(not timed_groups(result) and not self.history, "-untimed")  # no chart to draw

    def _draw_history(self) -> None:
        plot = self.query_one("#latency-history", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("kernel time per run (µs)")
        several = len(self.history) > 1
        every_run: set[int] = set()
        for kind, points in self.history.items():
            runs, times = (list(x) for x in zip(*points, strict=True))
            every_run.update(runs)
            if len(runs) > 1:
                plt.plot(runs, times, marker="braille")
            plt.scatter(runs, times, marker="●", label=kind if several else None)
        if self.history:
            plt.xlabel("run")
            plt.xticks(run_ticks(sorted(every_run)))
            if len(every_run) == 1:
                plt.xlim(min(every_run) - 1, min(every_run) + 1)
        plot.refresh()

    def _draw_plans(self, result: RunResult | None) -> None:
        """Every timed plan of every pass as a bar; with several passes, one colour a pass."""
        self.query_one("#latency-plans", Static).update(plan_bars(result))

    def _draw_samples(self, result: RunResult | None) -> None:
        """A strip a timed plan, top to bottom in the plans' order: each replay's time per execution
        as a dot, as % off the plan's median (a small vertical spread keeps equal dots apart)."""
        plot = self.query_one("#latency-samples", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        groups = timed_groups(result)
        self.strips = {
            strip_label(p, pass_prefix(kind, groups)): off_median(p.timing.samples_us, p.timing.median_us)
            for kind, plans in groups
            for p in plans
            if p.timing.samples_us
        }
        plt.title("samples, % off median" if self.strips else "samples: none in this result")
        rows = len(self.strips)
        for i, values in enumerate(self.strips.values()):
            y = [rows - i + 0.12 * ((k % 5) - 2) for k in range(len(values))]
            plt.scatter(values, y, marker="braille")
        if self.strips:
            plt.yticks(list(range(rows, 0, -1)), list(self.strips))
            plt.ylim(0.5, rows + 0.5)
            plt.vertical_line(0.0)
            plt.xlabel("% (a dot a replay; ! unstable)")
        # a row a strip, and the title, frame, ticks and label: a pane too short for it scrolls
        need = max(MIN_CHART_ROWS, rows + 6) if rows else 0  # none: the chart is not shown
        plot.styles.min_height = self.query_one("#latency-detail").styles.min_height = need
        plot.display = bool(rows)
        plot.refresh()


def timed_groups(result: RunResult | None) -> list[tuple[str, list[PlanResult]]]:
    """Each pass that timed plans, with its timed plans."""
    groups = [
        (p.kind, [x for x in p.plans if x.timing is not None]) for p in (result.passes if result else ())
    ]
    return [(kind, plans) for kind, plans in groups if plans]


def pass_prefix(kind: str, groups: list[tuple[str, list[PlanResult]]]) -> str:
    """'bwd ' before a later pass's plan labels; the first pass's go bare."""
    return "" if kind == groups[0][0] else f"{pass_short(kind)} "
