"""What a user sees, compared with stored SVG snapshots (update with --snapshot-update).

Figures come from results recorded on the H200 (tests/data), so run-to-run values are fixed and
the snapshots are stable on any machine. Where several screens need no engine, one app shows them
in turn: the same final screens as an app per screen, at a fraction of the start-ups (the screens
of the saved results, the masks and the run history are taken once, by `saved_screens`, for the
eight tests that compare them). The Explain pane's screens are taken by the test of
test_explain_pane.py that shows the same refusal, with this module's `screenshot`. The app that
took a table's snapshots then reads that table at both sizes for a cut cell (tests/table_fit.py):
the Sweep, History, Hunt and Search tables.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time

import pytest
from fakes import FP8, PEERS, RECORDED, TRAINING, FakeEngine, relabelled, slowed
from pilot_waits import show_pane, swept_with_every_peer, wait_for
from pytest_textual_snapshot import SVGImageExtension
from table_fit import candidates_problems, findings_problems, history_problems, sizes_problems, sweep_problems
from textual.widgets import Input

from tui.app import make_app, sweep_progress
from tui.app.widgets.status import Phase
from tui.model.config import SdpaConfig
from tui.store.history import History


def recorded_app():
    return make_app(RECORDED.config, start_engine=False)


async def show_recorded(pilot, result=RECORDED) -> None:
    pilot.app.show_result(result)
    await pilot.pause()


def pane(tab: str):
    """A view: the pane `tab` shown."""

    async def show(pilot) -> None:
        await show_pane(pilot, tab)

    return show


def terminal(width: int, height: int):
    """A view: the same screen in a terminal of another size."""

    async def show(pilot) -> None:
        await pilot.resize_terminal(width, height)
        await pilot.pause()

    return show


async def screenshot(pilot, view) -> str:
    """The screen as SVG once `view` is shown."""
    await view(pilot)
    await pilot.wait_for_scheduled_animations()
    for screen in pilot.app.screen_stack:  # the focused field's cursor is drawn, never mid-blink
        for field in screen.query(Input):
            field.cursor_blink = False
    await pilot.pause()
    return pilot.app.export_screenshot(title=pilot.app.title, simplify=True)


def mismatched(snapshot, shots: dict[str, str]) -> list[str]:
    """The panes whose screen differs from its stored snapshot (every one is compared, and
    recorded under --snapshot-update, before the test says which)."""
    svg = snapshot.use_extension(SVGImageExtension)
    return [name for name, shot in shots.items() if svg(name=name) != shot]


async def help_screen(pilot) -> None:
    """A view: F1's help over the dashboard."""
    await pilot.press("f1")


async def help_closed(pilot) -> None:
    await pilot.press("escape")
    await pilot.pause()


PADDED = SdpaConfig(b=2, s_q=4096, s_kv=4096, window=1024, seq_lens_q=(4096, 2500), seq_lens_kv=(4096, 3000))


async def padded_mask(pilot) -> None:
    """A view: the mask of a padded sliding-window batch in the form (no result), its second entry."""
    app = pilot.app
    app.form.load(PADDED)
    await wait_for(pilot, lambda: app.mask_config[0] == PADDED)
    await show_pane(pilot, "mask")
    app.query_one("#mask-batch").value = 1
    await pilot.pause()


async def mask_closed(pilot) -> None:
    """Undoes `padded_mask`: the seed's configuration in the form, the Plans pane shown."""
    app = pilot.app
    app.query_one("#mask-batch").value = 0
    await show_pane(pilot, "plans")
    app.form.load(RECORDED.config)
    await wait_for(pilot, lambda: app.mask_config[0] == RECORDED.config)


async def field_error(pilot) -> None:
    """A view: a field that does not validate on the Plans pane, the panes dimmed with it."""
    await pane("plans")(pilot)
    pilot.app.query_one("#f-h_kv").value = "5"
    await wait_for(pilot, lambda: pilot.app.status.state.phase is Phase.STALE)  # the panes dim with it


async def field_fixed(pilot) -> None:
    """Undoes `field_error`: the field valid again, the panes no longer stale."""
    pilot.app.query_one("#f-h_kv").value = str(RECORDED.config.h_kv)
    await wait_for(pilot, lambda: pilot.app.status.state.phase is Phase.DONE)


PAGED = SdpaConfig(b=4, h_q=32, h_kv=8, s_q=512, s_kv=2048, d_qk=128, d_v=128, dtype="bf16",
                   causal="bottom_right", page_size=64)  # fmt: skip


async def paged_mask_at_80x24(pilot) -> None:
    """A view: llama3-8b-chunked-prefill's shape in the form (no result) at 80x24, the mask of its
    third batch entry, then the page table with that sequence's row."""
    app = pilot.app
    await pilot.resize_terminal(80, 24)
    app.form.load(PAGED)
    await wait_for(pilot, lambda: app.mask_config[0] == PAGED)
    await show_pane(pilot, "mask")
    app.query_one("#mask-batch").value = 2
    storage = app.query_one("#mask-storage")
    await wait_for(pilot, lambda: "seq 2 " in str(storage.render()) and storage.size.width > 40)
    await terminal(80, 24)(pilot)


async def opened(pilot, result) -> None:
    """A saved result opened: its configuration in the form, the result in the panes."""
    app = pilot.app
    app.form.load(result.config)
    await wait_for(pilot, lambda: app.mask_config[0] == result.config)
    await show_recorded(pilot, result)


def kept_runs() -> None:
    """Three kept runs (the seed, the seed 25% slower, a training step), an hour apart from
    2026-01-01 00:00 UTC, in the run history."""
    with History() as history:
        history.record_many([(RECORDED, "seed", "run"), (slowed(RECORDED, 1.25), "seed", "check"),
                             (TRAINING, "llama3-8b-train", "dashboard")])  # fmt: skip
    with sqlite3.connect(history.path) as db:
        db.execute("UPDATE runs SET recorded_at = 1767225600 + 3600 * id")


async def two_runs_compared(pilot) -> None:
    """A view: the History pane, the two seeds marked and compared."""
    app = pilot.app
    await pilot.press("f2")
    history_pane = app.query_one("#history")
    await wait_for(pilot, lambda: len(history_pane.rows) == 3)
    table = app.query_one("#history-table")
    table.focus()
    table.move_cursor(row=1)
    await pilot.press("space", "down", "space", "c")
    await wait_for(pilot, lambda: history_pane.has_class("-comparing"))
    await pane("history")(pilot)


RESULT_TABS = ("plans", "phases", "accuracy", "latency", "environment", "mask", "graph")  # the seed's
SIZES = {"120x40": (120, 40), "80x24": (80, 24)}


@pytest.fixture(scope="module")
def saved_screens(tmp_path_factory) -> dict:
    """Every screen the tests below compare that needs no engine, of one app (a start-up each
    would be most of their time): before any result, the help, a padded batch's mask and a paged
    batch's at 80x24; then the seed's recording on each pane of a result at 80x24, and each again
    at 120x40 with a field error (two resizes fewer than 120x40 first); then the saved results
    opened in turn (the one with every peer, the FP8 prefill, the training step: a table keeps its
    columns' widths, and each result's are at least as wide as those before it, so each screen is
    the one a fresh app shows; the peers' at 80x24 stays right after its 120x40: taken after the
    training step, with the history's, it differs);
    then the seed's again with the run history of three kept runs at a fixed time in UTC, at
    120x40 and at 80x24 (before the comparison, what its table cuts at either size, scrolled
    sideways a column at a time). Also the History table's column widths and size at 80x24."""

    async def take() -> dict:
        app = recorded_app()
        async with app.run_test(size=(120, 40)) as pilot:
            shots = {"help": await screenshot(pilot, help_screen)}  # no result yet
            await help_closed(pilot)
            shots["padded-mask"] = await screenshot(pilot, padded_mask)
            shots["paged-mask-80x24"] = await screenshot(pilot, paged_mask_at_80x24)
            await mask_closed(pilot)
            await show_recorded(pilot)
            shots |= {f"{tab}-80x24": await screenshot(pilot, pane(tab)) for tab in RESULT_TABS}
            await terminal(120, 40)(pilot)
            shots |= {f"{tab}-120x40": await screenshot(pilot, pane(tab)) for tab in RESULT_TABS}
            shots["stale"] = await screenshot(pilot, field_error)  # on the Plans pane
            await field_fixed(pilot)
            await opened(pilot, PEERS)
            shots["peers-120x40"] = await screenshot(pilot, pane("peers"))
            shots["peers-80x24"] = await screenshot(pilot, terminal(80, 24))
            await terminal(120, 40)(pilot)
            await opened(pilot, FP8)
            shots["fp8-accuracy"] = await screenshot(pilot, pane("accuracy"))
            await opened(pilot, TRAINING)
            shots |= {
                f"training-{tab}": await screenshot(pilot, pane(tab))
                for tab in ("plans", "accuracy", "phases")
            }
            await opened(pilot, RECORDED)
            await pilot.press("f2")
            await wait_for(
                pilot, lambda: app.pane("history") is not None and len(app.pane("history").rows) == 3
            )
            shots["history-cut"] = await sizes_problems(pilot, history_problems)
            await pilot.press("home")
            await terminal(120, 40)(pilot)
            shots["history-120x40"] = await screenshot(pilot, two_runs_compared)
            shots["history-80x24"] = await screenshot(pilot, terminal(80, 24))
            table = app.query_one("#history-table")
            shots["history-widths-80x24"] = (list(table.widths), table.size)
        return shots

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path_factory.mktemp("kept-runs")))
        mp.setenv("TZ", "UTC")
        time.tzset()
        try:
            kept_runs()
            return asyncio.run(take())
        finally:
            mp.undo()
            time.tzset()


def test_result_panes(snapshot, saved_screens):
    """The seed's recording on each pane that draws a result, at 120x40 and at 80x24."""
    names = [f"{tab}-{size}" for size in SIZES for tab in RESULT_TABS]
    assert mismatched(snapshot, {name: saved_screens[name] for name in names}) == []


def test_field_error_marks_results_stale(snapshot, saved_screens):
    assert snapshot.use_extension(SVGImageExtension) == saved_screens["stale"]


def test_help_screen(snapshot, saved_screens):
    assert snapshot.use_extension(SVGImageExtension) == saved_screens["help"]


def test_mask_of_a_padded_sliding_window_batch(snapshot, saved_screens):
    assert snapshot.use_extension(SVGImageExtension) == saved_screens["padded-mask"]


def test_training_step_and_fp8(snapshot, saved_screens):
    """Recorded on the H200: the Llama-3-8B training step (both plan tables, both graphs' phases,
    the gradients) and the Llama-3-70B FP8 prefill (scales, amax against the reference)."""
    names = ["training-plans", "training-accuracy", "training-phases", "fp8-accuracy"]
    assert mismatched(snapshot, {name: saved_screens[name] for name in names}) == []


def test_peers_pane(snapshot, saved_screens):
    """Recorded on the H200: llama3-8b-prefill with every peer (--peers all), at 120x40 and 80x24."""
    assert mismatched(snapshot, {size: saved_screens[f"peers-{size}"] for size in SIZES}) == []


@pytest.mark.asyncio
async def test_sweep_pane(snapshot, monkeypatch):
    """llama3-8b-prefill with every peer ticked, swept over s = 1024 ... 8192: each point answers
    with the H200's recording of 8192 relabelled (so every line is flat), at 120x40 and 80x24; its
    table cuts no cell, with every point's kernel time, TFLOPS and share of peak whole, and at
    120x40 cuDNN's speed against each peer."""
    monkeypatch.setattr(sweep_progress, "clock", lambda: 0.0)  # elapsed times read 0 s
    fake = FakeEngine(relabelled(PEERS))
    app = make_app(PEERS.config, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await swept_with_every_peer(pilot, fake)
        shots = {"120x40": await screenshot(pilot, pane("sweep"))}
        shots["80x24"] = await screenshot(pilot, terminal(80, 24))
        cut = await sizes_problems(pilot, sweep_problems)
    fake.close()
    assert mismatched(snapshot, shots) == []
    assert cut == {}


def test_mask_of_a_paged_prefill_batch_at_80x24(snapshot, saved_screens):
    """llama3-8b-chunked-prefill's shape (512 new tokens against 2048 in shuffled pages of 64) in the
    form, its third batch entry selected: the mask, then the page table with that sequence's row."""
    assert snapshot.use_extension(SVGImageExtension) == saved_screens["paged-mask-80x24"]


def test_history_pane(snapshot, saved_screens):
    """Three kept runs (the seed, the seed 25% slower, a training step) at a fixed time in UTC, the
    two seeds marked and compared, at 120x40 and 80x24; at each place Right scrolls the table to,
    no cell is cut, and every cell of every run is whole at one of them."""
    assert saved_screens["history-cut"] == {}
    widths, table_size = saved_screens[
        "history-widths-80x24"
    ]  # at 80 columns: id, status, kernel, preset whole
    assert sum(w + 2 for w in widths[:5]) <= table_size.width, (widths, table_size)
    assert mismatched(snapshot, {size: saved_screens[f"history-{size}"] for size in SIZES}) == []


@pytest.mark.asyncio
async def test_search_pane(snapshot):
    """A knob search of the seed's configuration (F3, Enter in the budget), answered with the decode
    search in the H200's proportions (tests/fakes.py, SEARCHED): the pick against the best found and
    FLASH, the counts, the engines, the chart along KERNEL_CFG, and the best run again in a fresh
    engine process, at 120x40 and 80x24; the candidates' table cuts no cell, each one's plan, time
    and status whole (its max abs error too at 120x40)."""
    from test_knob_search import fresh_run

    fake = FakeEngine(relabelled(RECORDED))
    app = make_app(RECORDED.config, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        fake.then(lambda reply, config, _options: reply.result(fresh_run(config)))  # the fresh process's run
        await pilot.press("f3")
        app.query_one("#search-budget", Input).focus()
        await pilot.press("enter")
        await wait_for(
            pilot, lambda: app.search_result is not None and not app.searches.running and not fake.busy
        )
        shots = {"120x40": await screenshot(pilot, pane("search"))}
        shots["80x24"] = await screenshot(pilot, terminal(80, 24))
        cut = await sizes_problems(pilot, candidates_problems)
    fake.close()
    assert mismatched(snapshot, shots) == []
    assert cut == {}


def hunt_engine(monkeypatch) -> FakeEngine:
    """The fake engine of the two planted classes (tests/hunt_fakes.py), each run taking 2 s on
    the hunt's clock."""
    from hunt_fakes import answering, gqa_wrong_backward_nan

    from tui.jobs import hunt

    fake = FakeEngine(answering(gqa_wrong_backward_nan))
    monkeypatch.setattr(hunt, "Hunt", functools.partial(hunt.Hunt, clock=lambda: 2.0 * len(fake.requests)))
    return fake


async def hunted(pilot, fake: FakeEngine) -> None:
    """A hunt of seed 5 with grouped heads in every draw, in a minute's budget (F4, Enter in the
    seed), ended when the budget is spent, its bundles written and their toast gone."""
    app = pilot.app
    await wait_for(pilot, lambda: app.result is not None and not fake.busy)
    await pilot.press("f4")
    await wait_for(pilot, lambda: app.pane("hunt") is not None)
    app.query_one("#hunt-budget", Input).value = "1m"
    app.query_one("#hunt-focus", Input).value = "gqa"
    app.query_one("#hunt-seed", Input).value = "5"
    app.query_one("#hunt-seed", Input).focus()
    await pilot.press("enter")
    status = app.query_one("#hunt-status")
    await wait_for(pilot, lambda: "Ended" in str(status.render()) and not fake.busy)
    await wait_for(pilot, lambda: any(n.title == "Hunt" for n in app._notifications))  # the bundles
    app.clear_notifications()  # its folder is named by the time of day


@pytest.mark.asyncio
async def test_hunt_pane(snapshot, monkeypatch):
    """A hunt of seed 5 with grouped heads in every draw, in a minute's budget (F4, Enter in the
    seed), answered by the fake engine's two planted classes (tests/hunt_fakes.py): each run takes
    2 s on the hunt's clock, so it ends when the budget is spent; the inputs, Start and Stop, the
    hunt's line and both findings (each minimal configuration under the table), at 120x40 and 80x24;
    the findings' table cuts no cell, each one's whose, failure and signature whole on its row and
    its minimal configuration there or under the table."""
    fake = hunt_engine(monkeypatch)
    app = make_app(SdpaConfig(), client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await hunted(pilot, fake)
        shots = {"120x40": await screenshot(pilot, pane("hunt"))}
        shots["80x24"] = await screenshot(pilot, terminal(80, 24))
        cut = await sizes_problems(pilot, findings_problems)
    fake.close()
    assert mismatched(snapshot, shots) == []
    assert cut == {}
