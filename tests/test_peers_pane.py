"""The peers in the dashboard: ticked in the form they reach the engine's request (and a rerun),
a preset leaves them as they are; the Peers pane shows cuDNN's pick first, then every peer with
cuDNN's speed against it, its error and why it did not run; the headline says where cuDNN stands;
with none asked for, or no GPU, the pane says how to ask or why there are none."""

from __future__ import annotations

import pytest
from fakes import PEERS, RECORDED, TRAINING, FakeEngine, relabelled, with_peers
from pilot_waits import show_pane, wait_for
from test_peer_steps import with_backward_peers
from textual.widgets import Checkbox

from tui.app import make_app
from tui.model.config import SdpaConfig

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


def text(app, selector: str) -> str:
    return str(app.query_one(selector).render())


def table_rows(app) -> list[list[str]]:
    """Each row's cells, those of the columns a narrow pane leaves out too."""
    return [[str(cell) for cell in row] for row in app.query_one("#peers-table").every_row]


def asked(fake: FakeEngine) -> list[tuple[str, ...]]:
    """The peers each request asked for."""
    return [options.peers for _, options in fake.requests]


@pytest.mark.asyncio
async def test_ticked_peers_reach_the_request_rerun_and_outlast_a_preset_and_the_pane_shows_each_peer(
    tmp_path, monkeypatch
):
    """The ticks and their runs; then, in the same app (a start is most of such a test's time), what
    was test_the_pane_shows_the_pick_each_peer_its_speed_multiple_and_why_not_and_the_headline_the_standing:
    recorded on the H200, llama3-8b-prefill with --peers all, shown as a saved result is."""
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path / "presets"))
    fake = FakeEngine(relabelled(PEERS))
    app = make_app(SMALL, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        assert asked(fake) == [()]  # none ticked at first
        labels = [str(tick.label) for tick in app.query("#peer-ticks Checkbox").results(Checkbox)]
        assert labels == ["FLASH", "EFFICIENT", "CUDNN", "MATH", "Flex", "FA3", "FA4", "FlashInfer"]
        app.query_one("#f-peer-flex", Checkbox).value = True
        app.query_one("#f-peer-flash", Checkbox).value = True
        await wait_for(pilot, lambda: len(fake.requests) == 2 and not fake.busy and not app.run_pending)
        assert asked(fake)[-1] == ("flash", "flex")  # in the peers' own order, one run for both ticks
        assert app.form.options.peers == ("flash", "flex") and fake.requests[-1][0] == SMALL

        app.keeping.load_preset(app.presets["bert-base"])  # a preset is configuration: the peers stay ticked
        await wait_for(pilot, lambda: len(fake.requests) == 3 and not fake.busy and not app.run_pending)
        assert fake.requests[-1][0] == app.presets["bert-base"].config and asked(fake)[-1] == (
            "flash",
            "flex",
        )
        app.action_save_preset()
        await pilot.press(*"mine", "enter")
        await wait_for(pilot, lambda: "mine" in app.presets)
        assert "flex" not in (tmp_path / "presets" / "mine.toml").read_text().lower()

        app.set_peers(())  # the palette's "Peers: untick all"
        await wait_for(pilot, lambda: len(fake.requests) == 4 and not fake.busy and not app.run_pending)
        assert asked(fake)[-1] == () and not app.query_one("#f-peer-flex", Checkbox).value

        # the pane shows the pick, each peer its speed multiple and why not, the headline the standing
        app.show_result(PEERS)
        await pilot.press("alt+2")
        await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-peers")
        standing = "cuDNN 1.95x FLASH, 1.00x CUDNN, 63.51x MATH, 1.62x Flex"
        assert f"against peers: {standing}" in text(app, "#summary")
        assert text(app, "#peers-head").startswith(
            "cuDNN speed: a row's kernel time over cuDNN's heuristic pick's"
        )
        rows = table_rows(app)
        names = ["cuDNN H*", *(peer.name for peer in PEERS.forward.field_peers), "fastest: cuDNN H"]
        assert [row[0] for row in rows] == names  # the fastest way last: the pick, of five timed
        pick, flash, efficient, _, math, flex, fa3, _, fastest = rows
        assert fastest[1] == "877.29 µs" and fastest[5] == "pass"
        assert fastest[7] == "fastest way: cuDNN's pick 877.29 µs, the fastest of 5 ways timed (pass)"
        assert pick[1:4] == ["877.29 µs", "626.7", "1.00x"] and pick[5] == "pass" and pick[6] == "0.6 s"
        assert pick[7] == "the heuristic's pick: plan 0 eng2_k24=7"
        assert flash[1:4] == ["1.715 ms", "320.6", "1.95x"] and flash[5] == "pass"
        assert flash[7] == "FlashAttention-2 in torch"
        assert math[1] == "55.714 ms" and math[3] == "63.51x"
        assert flex[3] == "1.62x" and flex[6] == "4.8 s"  # compile time, apart from the kernel time
        gqa = "For dense input, both fused kernels require query, key and value to have the same num_heads"
        assert efficient[1:6] == ["-"] * 5 and efficient[7] == gqa  # torch's own words
        assert fa3[7] == "flash_attn_interface is not installed (FlashAttention-3)"
        assert f"torch EFFICIENT bf16 did not run: {gqa}" in text(app, "#peers-unrun")
        pane = app.query_one("#peers")
        assert list(pane.bars) == ["cuDNN H*", "FLASH", "CUDNN", "Flex"]
        assert pane.off_scale == {"MATH": pytest.approx(63.51, abs=0.01)}  # named under the chart, not drawn
        chart = app.query_one("#peers-chart").plt.build()
        assert "off the scale: MATH 63.51x" in chart and "FLASH" in chart

        other = with_peers(RECORDED, fastest=5)  # the fastest plan is another: a row and a bar of its own
        app.show_result(other)
        await pilot.pause()
        rows = table_rows(app)
        assert [row[0] for row in rows[:3]] == ["cuDNN H", "cuDNN *", "torch FLASH fp16"]
        assert rows[1][3] == "0.90x" and rows[1][7] == "the fastest plan: plan 5 eng2"
        assert rows[5][3] == "62.30x" and rows[5][5].startswith("FAIL (12 of ")  # MATH, outside tolerance
        assert list(app.query_one("#peers").bars)[:2] == ["cuDNN H", "cuDNN *"]
        assert rows[-1][0] == "fastest: cuDNN *" and "1.11x cuDNN's pick (pass)" in rows[-1][7]
        assert "fastest way: cuDNN's fastest plan" in text(app, "#summary")  # the headline says it too

        app.show_result(RECORDED)  # none asked for: how to ask, and nothing else
        await pilot.pause()
        assert "No peers in this result. Tick peers in the form" in text(app, "#peers-head")
        assert "--peers flash,flex" in text(app, "#peers-head")
        assert not app.query_one("#peers-table").display and not app.query_one("#peers-chart").display
        assert "against peers" not in text(app, "#summary")


@pytest.mark.asyncio
async def test_a_saved_result_ticks_its_own_peers_and_the_pane_shows_its_training_step():
    """A saved result opened ticks the peers it timed, and the Peers pane shows its training step
    against them (what was the second half of
    test_without_a_gpu_the_ticked_peers_are_said_not_run_and_a_saved_result_ticks_its_own; its first
    half, the CPU engine's, is checked in test_app.py's run of the CPU engine)."""
    opened = with_peers(TRAINING)  # a saved result: Ctrl+R times the peers it timed
    app = make_app(client=FakeEngine(), opened=opened, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.form.options.peers == ("flash", "efficient", "cudnn", "math", "flex", "fa3", "flashinfer")
        assert app.form.options.timing.regime == "sustained"
        await show_pane(pilot, "peers")
        assert "no peer was timed for the backward in this result" in text(app, "#peers-head")
        assert not app.query_one("#peers-step").display  # no backward peers: no step to show

        app.show_result(with_backward_peers(TRAINING))  # what test_peer_steps.py makes of the step
        await pilot.pause()
        assert app.query_one("#peers-step").display and app.query_one("#peers-step-head").display
        assert text(app, "#peers-step-head").startswith("Training step against peers")
        assert "no peer was timed for the backward" not in text(app, "#peers-head")
        steps = [[str(cell) for cell in row] for row in app.query_one("#peers-step").every_row]
        assert [row[0] for row in steps] == ["cuDNN", "FLASH", "Flex", "FA3", "FA4"]
        assert steps[0][4] == "1.00x" and steps[-1][5] == "FAIL" and steps[3][3] == "-"
        assert steps[3][6] == "FA3's backward is not driven here"
        await pilot.resize_terminal(80, 24)  # a narrow pane: the step table leaves out columns, cuts none
        step = app.query_one("#peers-step")
        await wait_for(pilot, lambda: 0 < step.virtual_size.width <= step.scrollable_content_region.width)
        assert {"step of", "step", "cuDNN speed", "dQ/dK/dV"} <= {str(c.label) for c in step.columns.values()}
