"""Latency charts: each pass's kernel time of every run since the app started, and per plan now."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from ...engine.results import PlanResult, RunResult
from ...format import pass_short


def plan_label(p: PlanResult, prefix: str = "") -> str:
    return f"{prefix}{p.index}{'H' if p.is_heuristic_pick else ''}{'*' if p.is_fastest else ''} {p.name}"


class LatencyPane(Horizontal):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.runs = 0  # GPU runs shown since the app started
        self.history: dict[
            str, list[tuple[int, float]]
        ] = {}  # pass kind -> (run, kernel µs) of each timed run

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="latency-history")
        yield PlotextPlot(id="latency-plans")

    def on_mount(self) -> None:
        self._draw_history()
        self._draw_plans(None)

    def show(self, result: RunResult) -> None:
        timed = [p for p in result.passes if p.timing is not None]
        if timed:
            self.runs += 1
            for p in timed:
                self.history.setdefault(p.kind, []).append((self.runs, p.timing.median_us))
        self._draw_history()
        self._draw_plans(result)

    def _draw_history(self) -> None:
        plot = self.query_one("#latency-history", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("kernel time per run (µs)")
        several = len(self.history) > 1
        for kind, points in self.history.items():
            runs, times = (list(x) for x in zip(*points, strict=True))
            if len(runs) > 1:
                plt.plot(runs, times, marker="braille")
            plt.scatter(runs, times, marker="●", label=kind if several else None)
        if self.history:
            plt.xlabel("run")
        plot.refresh()

    def _draw_plans(self, result: RunResult | None) -> None:
        """Every timed plan of every pass as a bar; with several passes, one colour a pass."""
        plot = self.query_one("#latency-plans", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("kernel time per plan (µs)")
        groups = [
            (p.kind, [x for x in p.plans if x.timing is not None]) for p in (result.passes if result else ())
        ]
        groups = [(kind, plans) for kind, plans in groups if plans]
        if len(groups) == 1:
            plans = groups[0][1]
            plt.bar([plan_label(p) for p in plans], [p.timing.median_us for p in plans], orientation="horizontal",
                    width=0.4)  # fmt: skip
        elif groups:
            at, labels, start = [], [], 1
            for kind, plans in groups:
                where = list(range(start, start + len(plans)))
                plt.bar(
                    where,
                    [p.timing.median_us for p in plans],
                    orientation="horizontal",
                    width=0.4,
                    label=kind,
                )
                at += where
                labels += [
                    plan_label(p, "" if kind == groups[0][0] else f"{pass_short(kind)} ") for p in plans
                ]
                start += len(plans)
            plt.yticks(at, labels)
        if groups:
            plt.xlabel("µs (H heuristic's pick, * fastest)")
        plot.refresh()
