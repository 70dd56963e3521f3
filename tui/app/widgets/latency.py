"""Latency charts: kernel time of each run since the app started, and per plan now (the
backward's plans too, for a training step)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from ...engine.results import PlanResult, RunResult


def plan_label(p: PlanResult, prefix: str = "") -> str:
    return f"{prefix}{p.index}{'H' if p.is_heuristic_pick else ''}{'*' if p.is_fastest else ''} {p.name}"


class LatencyPane(Horizontal):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: list[float] = []  # kernel µs of each GPU run, in order
        self.backward_history: list[tuple[int, float]] = []  # (run, backward kernel µs) of training steps

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="latency-history")
        yield PlotextPlot(id="latency-plans")

    def on_mount(self) -> None:
        self._draw_history()
        self._draw_plans(None)

    def show(self, result: RunResult) -> None:
        if result.timing is not None:
            self.history.append(result.timing.median_us)
            b = result.backward
            if b is not None and b.timing is not None:
                self.backward_history.append((len(self.history), b.timing.median_us))
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
            if self.backward_history:
                plt.scatter(runs, self.history, marker="●", label="forward")
                bwd_runs, bwd_us = zip(*self.backward_history, strict=True)
                plt.scatter(list(bwd_runs), list(bwd_us), marker="●", label="backward")
            else:
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
        bwd = [
            p for p in (result.backward.plans if result and result.backward else ()) if p.timing is not None
        ]
        if bwd:
            self._bar_groups(plt, timed, bwd)
        elif timed:
            plt.bar(
                [plan_label(p) for p in timed],
                [p.timing.median_us for p in timed],
                orientation="horizontal",
                width=0.4,
            )
        if timed or bwd:
            plt.xlabel("µs (H heuristic's pick, * fastest)")
        plot.refresh()

    @staticmethod
    def _bar_groups(plt, forward: list[PlanResult], backward: list[PlanResult]) -> None:
        """Forward and backward plans as two coloured groups on one axis, backward's labelled 'bwd'."""
        at = list(range(1, len(forward) + len(backward) + 1))
        fwd_at, bwd_at = at[: len(forward)], at[len(forward) :]
        if forward:
            plt.bar(
                fwd_at,
                [p.timing.median_us for p in forward],
                orientation="horizontal",
                width=0.4,
                label="forward",
            )
        plt.bar(
            bwd_at,
            [p.timing.median_us for p in backward],
            orientation="horizontal",
            width=0.4,
            label="backward",
        )
        plt.yticks(at, [plan_label(p) for p in forward] + [plan_label(p, "bwd ") for p in backward])
