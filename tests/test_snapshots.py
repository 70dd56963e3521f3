"""What a user sees, compared with stored SVG snapshots (update with --snapshot-update).

Figures come from results recorded on the H200 (tests/data), so run-to-run values are fixed and
the snapshots are stable on any machine. Where several panes of one result are compared, one app
shows them in turn: the same final screens as an app per pane, at a fraction of the start-ups.
"""

from __future__ import annotations

import pytest
from fakes import FP8, RECORDED, TRAINING
from pilot_waits import wait_for
from pytest_textual_snapshot import SVGImageExtension

from tui.app import make_app
from tui.app.widgets.status import Phase
from tui.engine.config import SdpaConfig


def recorded_app():
    return make_app(RECORDED.config, start_engine=False)


async def show_recorded(pilot) -> None:
    pilot.app.show_result(RECORDED)
    await pilot.pause()


def pane(tab: str):
    """A view: the pane `tab` shown."""

    async def show(pilot) -> None:
        pilot.app.query_one("#tabs").active = f"tab-{tab}"
        await pilot.pause()

    return show


def terminal(width: int, height: int):
    """A view: the same screen in a terminal of another size."""

    async def show(pilot) -> None:
        await pilot.resize_terminal(width, height)
        await pilot.pause()

    return show


async def screenshots(result, views: dict, size=(120, 40)) -> dict[str, str]:
    """One app shows `result`, then each of `views` in turn: the screen as SVG, per view."""
    app = make_app(result.config, start_engine=False)
    shots: dict[str, str] = {}
    async with app.run_test(size=size) as pilot:
        app.show_result(result)
        await pilot.pause()
        for name, view in views.items():
            await view(pilot)
            await pilot.wait_for_scheduled_animations()
            shots[name] = app.export_screenshot(title=app.title, simplify=True)
    return shots


def mismatched(snapshot, shots: dict[str, str]) -> list[str]:
    """The panes whose screen differs from its stored snapshot (every one is compared, and
    recorded under --snapshot-update, before the test says which)."""
    svg = snapshot.use_extension(SVGImageExtension)
    return [name for name, shot in shots.items() if svg(name=name) != shot]


@pytest.mark.asyncio
async def test_plans_pane(snapshot):
    shots = await screenshots(RECORDED, {"120x40": pane("plans"), "80x24": terminal(80, 24)})
    assert mismatched(snapshot, shots) == []


@pytest.mark.asyncio
async def test_other_panes(snapshot):
    tabs = ["phases", "accuracy", "latency", "environment", "mask"]
    shots = await screenshots(RECORDED, {tab: pane(tab) for tab in tabs})
    assert mismatched(snapshot, shots) == []


def test_field_error_marks_results_stale(snap_compare):
    async def run_before(pilot) -> None:
        await show_recorded(pilot)
        pilot.app.query_one("#f-h_kv").value = "5"
        await wait_for(pilot, lambda: pilot.app.status.state.phase is Phase.STALE)  # the panes dim with it

    assert snap_compare(recorded_app(), terminal_size=(120, 40), run_before=run_before)


def test_help_screen(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(120, 40), press=["f1"])


def test_mask_of_a_padded_sliding_window_batch(snap_compare):
    config = SdpaConfig(
        b=2, s_q=4096, s_kv=4096, window=1024, seq_lens_q=(4096, 2500), seq_lens_kv=(4096, 3000)
    )

    async def run_before(pilot) -> None:
        pilot.app.query_one("#tabs").active = "tab-mask"
        await pilot.pause()
        pilot.app.query_one("#mask-batch").value = 1
        await pilot.pause()

    assert snap_compare(make_app(config, start_engine=False), terminal_size=(120, 40), run_before=run_before)


@pytest.mark.asyncio
async def test_training_step_and_fp8(snapshot):
    """Recorded on the H200: the Llama-3-8B training step (both plan tables, both graphs' phases,
    the gradients) and the Llama-3-70B FP8 prefill (scales, amax against the reference)."""
    shots = await screenshots(
        TRAINING, {f"training-{tab}": pane(tab) for tab in ("plans", "accuracy", "phases")}
    )
    shots |= await screenshots(FP8, {"fp8-accuracy": pane("accuracy")})
    assert mismatched(snapshot, shots) == []
