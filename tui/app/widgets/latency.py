"""Latency charts: kernel time of each run since the app started, and per plan now."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from ...engine.results import RunResult


class LatencyPane(Horizontal):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: list[float] = []  # kernel µs of each GPU run, in order

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="latency-history")
        yield PlotextPlot(id="latency-plans")

    def on_mount(self) -> None:
        self._draw_history()
        self._draw_plans(None)

    def show(self, result: RunResult) -> None:
        if result.timing is not None:
            self.history.append(result.timing.median_us)
        self._draw_history()
        self._draw_plans(result)

    def _draw_history(self) -> None:
        plot = self.query_one("#latency-history", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("kernel time per run (µs)")
        if self.history:
            runs = list(range(1, len(self.history) + 1))
            if len(runs) > 1:
                plt.plot(runs, self.history, marker="braille")
            plt.scatter(runs, self.history, marker="●")
            plt.xlabel("run")
        plot.refresh()

    def _draw_plans(self, result: RunResult | None) -> None:
        plot = self.query_one("#latency-plans", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("kernel time per plan (µs)")
        timed = [p for p in (result.plans if result else ()) if p.timing is not None]
        if timed:
            labels = [
                f"{p.index}{'H' if p.is_heuristic_pick else ''}{'*' if p.is_fastest else ''} {p.name}" for p in timed
            ]
            plt.bar(labels, [p.timing.median_us for p in timed], orientation="horizontal", width=0.4)
            plt.xlabel("µs (H heuristic's pick, * fastest)")
        plot.refresh()
