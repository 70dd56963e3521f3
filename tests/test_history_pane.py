"""The History pane: the dashboard keeps every result it receives in the run history (off the UI
thread, with the preset it came from while the form still holds it), the pane lists the runs
newest first, narrows them as you type, reads 10,000 a page at a time, reopens one into the
panes, and compares two marked runs with the change in % of each plan's kernel time."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest
from fakes import RECORDED, TRAINING, FakeEngine, relabelled, slowed
from pilot_waits import wait_for
from rich.console import Console
from textual.widgets import Input, Static

from tui.app import make_app
from tui.app.widgets.history import PAGE, HistoryPane, row_words
from tui.model.config import SdpaConfig
from tui.store.history import COLUMN_NAMES, History

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


@pytest.fixture(autouse=True)
def own_history(tmp_path, monkeypatch):
    """A history of this test's own (the session's is shared by the tests of one worker)."""
    monkeypatch.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path / "presets"))


def rendered(renderable) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def pane(app) -> HistoryPane:
    return app.query_one(HistoryPane)


def shown_ids(app) -> list[int]:
    return [r.id for r in pane(app).rows]


async def show_history(app, pilot) -> None:
    """F2, then the pane made (the first time it is shown) and listing."""
    await pilot.press("f2")
    await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-history" and app.pane("history"))


@pytest.mark.asyncio
async def test_runs_of_the_dashboard_are_kept_listed_newest_first_and_enter_reopens_one_running_nothing():
    """The dashboard's runs are kept and listed newest first as they come; then, in the same app (a
    start is most of such a test's time), what was
    test_enter_reopens_a_run_into_the_panes_and_nothing_runs: Enter on the older run shows it as
    kept, and nothing runs or is kept again."""
    fake = FakeEngine(relabelled(RECORDED))
    app = make_app(SMALL, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_history(app, pilot)
        await wait_for(pilot, lambda: app.result is not None and len(pane(app).rows) == 1)
        app.keeping.load_preset(app.presets["bert-base"])  # its run is kept under its name
        await wait_for(pilot, lambda: len(pane(app).rows) == 2)
        newest, first = pane(app).rows
        assert (newest.source, newest.preset, newest.label) == (
            "dashboard",
            "bert-base",
            app.result.config.label(),
        )
        assert (first.preset, first.label, first.status) == (None, SMALL.label(), RECORDED.status)
        assert newest.id > first.id and pane(app).total == 2
        assert "2 of 2 runs" in str(app.query_one("#history-note").render())

        # Enter reopens a run into the panes, and nothing runs
        await wait_for(pilot, lambda: not fake.busy and not app.run_pending)
        runs = len(fake.requests)
        table = app.query_one("#history-table")
        table.focus()
        table.move_cursor(row=shown_ids(app).index(first.id))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.result is not None and app.result.config == SMALL)
        await wait_for(pilot, lambda: app.form.read()[0] == SMALL and not app.run_pending)
        assert len(fake.requests) == runs  # shown as kept: nothing ran
        assert SMALL.label() in str(app.query_one("#summary").render())
        with History() as history:
            assert history.count() == 2  # and not kept again


@pytest.mark.asyncio
async def test_a_run_kept_while_the_pane_is_being_made_is_listed(monkeypatch):
    """The pane's first read may start before a run is kept and end after: the run kept meanwhile
    reads the list again (the pane was not yet the app's to tell, and the list stayed empty)."""
    app = make_app(SMALL, client=FakeEngine(relabelled(RECORDED)), start_engine=False)
    mounted = HistoryPane.on_mount

    def mount_then_keep(pane: HistoryPane) -> None:
        mounted(pane)  # its first read starts: the history is empty

        def kept() -> None:
            with History() as history:
                history.record_many([(RECORDED, "seed", "run")])
            app.keeper.kept()  # as the app's keeping thread says once a run is written

        pane.call_later(kept)  # after its mount, before the app has it as made

    monkeypatch.setattr(HistoryPane, "on_mount", mount_then_keep)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_history(app, pilot)
        await wait_for(pilot, lambda: len(pane(app).rows) == 1 and not pane(app).filter_pending, timeout=10)


@pytest.mark.asyncio
async def test_ten_thousand_runs_load_a_page_at_a_time():
    bare = dataclasses.replace(RECORDED, passes=())
    seeds = [
        (dataclasses.replace(bare, config=dataclasses.replace(SMALL, b=b)), None, "run") for b in range(1, 9)
    ]
    columns = ", ".join((*COLUMN_NAMES, "result"))
    with History() as history:
        history.record_many(seeds)
        conn = history._connect()
        with conn:  # the seeds 1,249 times more, as that many runs of them would have been kept (writing
            for _ in range(1249):  # each result takes a millisecond: 10,000 took most of this test's time)
                conn.execute(f"INSERT INTO runs ({columns}) SELECT {columns} FROM runs ORDER BY id LIMIT 8")
    app = make_app(SMALL, client=FakeEngine(relabelled(RECORDED)), start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_history(app, pilot)
        await wait_for(pilot, lambda: len(pane(app).rows) == PAGE)
        assert pane(app).total == 10_000 and shown_ids(app)[0] == 10_000
        table = app.query_one("#history-table")
        table.focus()
        covered: list[bool] = []  # a page read in the background never covers the list with an indicator
        pane(app).set_loading = lambda loading: covered.append(loading)
        await pilot.press("ctrl+end")  # the end of the first page reads the next
        await wait_for(pilot, lambda: len(pane(app).rows) == 2 * PAGE)
        assert shown_ids(app)[-1] == 10_000 - 2 * PAGE + 1 and True not in covered


@pytest.mark.asyncio
async def test_keys_in_the_filter_lay_nothing_out_the_filter_narrows_and_two_marked_runs_compare():
    """One start without an engine over four kept runs, the checks of what were these tests:
    - test_a_key_typed_in_the_filter_or_a_form_field_asks_for_no_layout_of_the_screen: an Input's
      text sets its virtual size, which Textual counts as a layout change: every key re-laid the
      whole screen out, a third of the filter's answer to a key. The fields of the main screen
      repaint themselves only; what typing into them starts (a filter, a run) is its own;
    - test_the_filter_narrows_the_list_as_you_type;
    - test_two_marked_runs_compare_with_the_change_in_percent."""
    with History() as history:
        history.record_many([(RECORDED, "seed", "run"), (slowed(RECORDED, 1.25), "seed", "run"),
                             (TRAINING, "llama3-8b-train", "check"), (RECORDED, None, "run")])  # fmt: skip
    app = make_app(SMALL, client=FakeEngine(relabelled(RECORDED)), start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_history(app, pilot)
        await wait_for(pilot, lambda: shown_ids(app) == [4, 3, 2, 1])

        # a key typed in the filter or a form field asks for no layout of the screen
        for selector in ("#history-filter", "#f-b"):
            field = app.query_one(selector, Input)
            field.focus()
            await pilot.pause()
            asked: list[bool] = []
            refresh = field.refresh

            def watched(*regions, layout=False, refresh=refresh, asked=asked, **kw):
                asked.append(layout)
                return refresh(*regions, layout=layout, **kw)

            field.refresh = watched
            await pilot.press("7")
            assert field.value.endswith("7") and asked and not any(asked), (selector, asked)
            del field.refresh
            field.value = field.value[:-1]  # as it was, for the checks below

        # the filter narrows the list as you type
        await wait_for(pilot, lambda: shown_ids(app) == [4, 3, 2, 1] and not pane(app).filter_pending)
        app.query_one("#history-filter", Input).focus()
        await pilot.press(*"llama")
        await wait_for(pilot, lambda: shown_ids(app) == [3] and not pane(app).filter_pending)
        assert pane(app).total == 1 and "matching “llama”" in str(app.query_one("#history-note").render())
        await pilot.press(*"-nothing")
        await wait_for(pilot, lambda: shown_ids(app) == [] and not pane(app).filter_pending)
        app.query_one("#history-filter", Input).value = ""
        await wait_for(pilot, lambda: shown_ids(app) == [4, 3, 2, 1] and not pane(app).filter_pending)

        # two marked runs compare with the change in percent
        table = app.query_one("#history-table")
        table.focus()
        table.move_cursor(row=2)
        await pilot.press("space", "down", "space", "c")
        await wait_for(pilot, lambda: pane(app).has_class("-comparing"))
        assert pane(app).marked == [2, 1], "the runs marked"
        shown = rendered(app.query_one("#history-comparison", Static).content)
        assert "A #1" in shown and "B #2" in shown and "+25.0%" in shown, shown


def test_the_pane_and_the_cli_say_when_a_run_was_kept_in_the_same_words():
    from tui.cli.history import history_table

    with History() as history:
        history.record(RECORDED, preset="gpt2-seed")
        (row,) = history.runs()
    when = row_words(row)[5]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", when), when
    assert when in rendered(history_table([row], "runs"))
