"""What a user sees, compared with stored SVG snapshots (update with --snapshot-update).

Figures come from a result recorded on the H200 (tests/data/seed_h200.json), so run-to-run
values are fixed and the snapshots are stable on any machine.
"""

from __future__ import annotations

import pytest
from fakes import FP8, RECORDED, TRAINING
from pilot_waits import wait_for

from tui.app import make_app
from tui.app.widgets.status import Phase


def recorded_app():
    return make_app(RECORDED.config, start_engine=False)


async def show_recorded(pilot) -> None:
    pilot.app.show_result(RECORDED)
    await pilot.pause()


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_plans_pane(snap_compare, size):
    assert snap_compare(recorded_app(), terminal_size=size, run_before=show_recorded)


@pytest.mark.parametrize("tab", ["phases", "accuracy", "latency", "environment", "mask"])
def test_other_panes(snap_compare, tab):
    async def run_before(pilot) -> None:
        await show_recorded(pilot)
        pilot.app.query_one("#tabs").active = f"tab-{tab}"
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(120, 40), run_before=run_before)


def test_field_error_marks_results_stale(snap_compare):
    async def run_before(pilot) -> None:
        await show_recorded(pilot)
        pilot.app.query_one("#f-h_kv").value = "5"
        await wait_for(pilot, lambda: pilot.app.status.state.phase is Phase.STALE)  # the panes dim with it

    assert snap_compare(recorded_app(), terminal_size=(120, 40), run_before=run_before)


def test_help_screen(snap_compare):
    assert snap_compare(recorded_app(), terminal_size=(120, 40), press=["f1"])


def test_mask_of_a_padded_sliding_window_batch(snap_compare):
    from tui.engine.config import SdpaConfig

    config = SdpaConfig(
        b=2, s_q=4096, s_kv=4096, window=1024, seq_lens_q=(4096, 2500), seq_lens_kv=(4096, 3000)
    )

    async def run_before(pilot) -> None:
        pilot.app.query_one("#tabs").active = "tab-mask"
        await pilot.pause()
        pilot.app.query_one("#mask-batch").value = 1
        await pilot.pause()

    assert snap_compare(make_app(config, start_engine=False), terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize(
    "result,tab",
    [(TRAINING, "plans"), (TRAINING, "accuracy"), (TRAINING, "phases"), (FP8, "accuracy")],
    ids=["training-plans", "training-accuracy", "training-phases", "fp8-accuracy"],
)
def test_training_step_and_fp8(snap_compare, result, tab):
    """Recorded on the H200: the Llama-3-8B training step (both plan tables, both graphs' phases,
    the gradients) and the Llama-3-70B FP8 prefill (scales, amax against the reference)."""

    async def run_before(pilot) -> None:
        pilot.app.show_result(result)
        await pilot.pause()
        pilot.app.query_one("#tabs").active = f"tab-{tab}"
        await pilot.pause()

    assert snap_compare(
        make_app(result.config, start_engine=False), terminal_size=(120, 40), run_before=run_before
    )
