"""The Latency pane and the headline of a schema 2.1 result, driven by Pilot on the CPU: every
sample of every plan as a strip, the GPU around each pass's figure (or why there is none), each
figure's regime in the headline; and the pane's room at 120x40 and 80x24."""

from __future__ import annotations

import pytest
from fakes import RECORDED, TRAINING, recording
from measured import GAPS, NO_NVML, flushed, measured
from rich.console import Console

from tui.app import make_app
from tui.present.format import us


def text_of(renderable, width: int = 60) -> str:
    console = Console(record=True, width=width)
    console.print(renderable)
    return " ".join(console.export_text().split())


def gpu_text(app) -> str:
    return text_of(app.query_one("#latency-gpu").content)


async def on_latency(pilot, result) -> None:
    """Show `result` and open the Latency tab."""
    pilot.app.show_result(result)
    pilot.app.query_one("#tabs").active = "tab-latency"
    await pilot.pause()


def viewer(result):
    return make_app(result.config, start_engine=False)  # no engine: nothing else arrives


@pytest.mark.asyncio
async def test_the_pane_shows_every_plans_samples_and_the_gpu_around_each_figure_or_why_not():
    """One dashboard shows in turn: the seed measured under sustained load (its heuristic's plan
    unstable), on an L2 flushed each time; a training step in burst on a machine without NVML; a
    result of schema 1.0, measured before samples were recorded; then, the terminal down to
    80x24, a training step with both passes unstable."""
    result = flushed(measured(RECORDED))
    async with viewer(result).run_test(size=(120, 40)) as pilot:
        app = pilot.app
        await on_latency(pilot, result)
        pane = app.query_one("#latency")
        fwd = result.forward
        assert pane.history == {"forward": [(1, fwd.timing.median_us)]}  # as before
        runs = app.query_one("#latency-history").plt.build()
        assert "0.50" not in runs and "1.50" not in runs  # runs are counted: whole numbers on the axis
        timed = [p for p in fwd.plans if p.timing is not None]
        assert len(pane.strips) == len(timed) == 6
        fastest = "*" if fwd.fastest_plan == fwd.heuristic_plan else ""
        pick = f"{fwd.heuristic_plan}H{fastest}!"  # the heuristic's plan (maybe the fastest), unstable
        assert pick in pane.strips and sum(label.endswith("!") for label in pane.strips) == 1
        assert sorted({round(v, 6) for v in pane.strips[pick]}) == [-3.960396, 3.960396]  # two clusters
        assert all(abs(v) < 0.5 for label, values in pane.strips.items() if label != pick for v in values)
        chart = app.query_one("#latency-samples").plt.build()
        assert "samples, % off median" in chart and pick in chart
        text = gpu_text(app)
        for words in (
            f"forward {us(fwd.timing.median_us)}, sustained",
            "samples 20, retried",
            f"p90/p10 {fwd.timing.p90_us / fwd.timing.p10_us:.3f}, UNSTABLE",
            "SM clock 1980 → 1755 MHz",
            "mem clock 3201 → 3201 MHz",
            "power 121 → 699 W of 700 W",
            "temperature 38 → 61 °C",
            "reasons none → sw power cap",
            "capped power 38%, thermal 0%",
            "rest wait 0.40 s, rested",
            "L2 flushed, 100.0 MiB before each execution",
            GAPS,
        ):
            assert words in text, words
        summary = str(app.query_one("#summary").render())
        assert f"forward kernel {us(fwd.timing.median_us)} ({fwd.timing.regime_words})" in summary
        assert "power-capped 38%" in summary and "unstable (p90/p10 " in summary
        # 120x40: the charts and the GPU's rows fit without scrolling the pane
        assert pane.max_scroll_y == 0 and app.query_one("#latency-detail").region.bottom <= pane.region.bottom
        # without NVML one line says why, and an older result has no samples
        result = measured(
            TRAINING, regime="burst", telemetry=None, unstable=(), environment_telemetry=NO_NVML
        )
        await on_latency(pilot, result)
        text = gpu_text(app)
        assert text.count(f"no telemetry: {NO_NVML}") == 2  # one line a pass, no rows of GPU state
        assert "SM clock" not in text and "forward" in text and "backward" in text
        assert "bwd 0H*" in app.query_one("#latency").strips  # the backward's plans, named by their pass
        summary = str(app.query_one("#summary").render())
        assert summary.count("(burst)") == 3  # forward, backward, and the step they add up to
        old = recording("seed")  # schema 1.0: measured before any of this was recorded
        app.show_result(old)
        await pilot.pause()
        assert app.query_one("#latency").strips == {}
        assert "samples: none in this result" in app.query_one("#latency-samples").plt.build()
        assert "regime not recorded" in gpu_text(
            app
        ) and "no telemetry: not recorded in this result" in gpu_text(app)
        assert f"forward kernel {us(old.forward.timing.median_us)}  " in str(
            app.query_one("#summary").render()
        )
        assert len(app.query_one("#latency").history["forward"]) == 3  # a point a result, samples or not
        # at 80x24 each chart keeps legible room and the pane scrolls to the rest
        await pilot.resize_terminal(80, 24)
        result = measured(TRAINING, unstable=("forward", "backward"))
        await on_latency(pilot, result)
        pane = app.query_one("#latency")
        samples = app.query_one("#latency-samples")
        timed = sum(p.timing is not None for ps in result.passes for p in ps.plans)
        assert app.query_one("#latency-history").size.height >= 10
        assert samples.size.height >= timed + 6 and samples.size.width == pane.scrollable_content_region.width
        box = app.query_one("#latency-gpu-box")
        assert box.region.y >= samples.region.bottom  # the GPU's rows under the strips, the full width
        assert pane.max_scroll_y > 0 and "SM clock" in gpu_text(app)
        pane.scroll_end(animate=False)
        await pilot.pause()
        assert box.region.bottom <= pane.region.bottom + pane.max_scroll_y
