"""Widgets of auto height are laid out exactly when their height changes: a table follows its rows
even when the screen laid it out before it measured them (the Explain grid stayed empty in one
start of eight on a loaded machine), a line whose new words fill as many rows repaints alone (and
one its box holds taller asks once), and a line held while a job runs keeps its rows."""

from __future__ import annotations

import pytest
from pilot_waits import wait_for
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.app.widgets.fitted import FittedStatic, FittedTable


class OneTable(App):
    CSS = "FittedTable { height: auto; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("above")
            yield FittedTable(cursor_type="none")
            yield Static("below")

    def on_mount(self) -> None:
        self.query_one(FittedTable).display = False  # shown with its first rows, as the Explain grid


@pytest.mark.asyncio
async def test_a_table_laid_out_before_it_measured_its_rows_takes_their_height_after():
    app = OneTable()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(FittedTable)
        await wait_for(pilot, lambda: app.query_one(VerticalScroll).size.height > 0)
        table.display = True  # asks for a layout ...
        table.add_columns("plan", "kernel time")
        table.add_rows([("1", "10 µs"), ("2", "11 µs"), ("3", "12 µs")])  # ... its rows measured when idle
        app.query_one(VerticalScroll)._clear_arrangement_cache()  # as a neighbour's new text does
        app.screen._refresh_layout()  # the screen lays the table out first, as a busy one may
        assert table.size.height == 0
        await wait_for(pilot, lambda: table.size.height == 4, timeout=10)


class OneLine(App):
    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield FittedStatic("sweep: 1 of 8 points done", id="line")
            yield Static("below", id="below")


@pytest.mark.asyncio
async def test_a_line_lays_the_screen_out_only_when_its_words_change_its_height(monkeypatch):
    app = OneLine()
    async with app.run_test(size=(60, 20)) as pilot:
        line, below = app.query_one("#line", FittedStatic), app.query_one("#below")
        await wait_for(pilot, lambda: line.size.height == 1 and below.region.y == line.region.y + 1)
        await pilot.pause()  # the start's layouts all done
        layouts = []  # what asked for each layout of the screen
        refresh_layout = Screen._refresh_layout

        def counted(screen, size=None, scroll=False):
            layouts.append({w.id for asked in screen._layout_widgets.values() for w in asked})
            return refresh_layout(screen, size, scroll)

        monkeypatch.setattr(Screen, "_refresh_layout", counted)
        line.update("sweep: 2 of 8 points done")
        await wait_for(pilot, lambda: "2 of 8" in str(line.render()))
        await pilot.pause()
        assert layouts == []  # the same row: repainted alone
        line.update("sweep: 3 of 8 points done\nthe point under way: s=4096")
        await wait_for(pilot, lambda: line.size.height == 2 and below.region.y == line.region.y + 2)
        assert layouts
        line.styles.min_height = 3  # its box holds it taller than its words (the Hunt pane's line)
        await wait_for(pilot, lambda: line.size.height == 3)
        line.update("sweep: 4 of 8 points done")  # one row: asks for a layout, which keeps 3
        await wait_for(pilot, lambda: "4 of 8" in str(line.render()))
        await pilot.pause()
        layouts.clear()
        for n in (5, 6, 7):  # one row again and again: asked once already
            line.update(f"sweep: {n} of 8 points done")
            await wait_for(pilot, lambda n=n: f"{n} of 8" in str(line.render()))
            await pilot.pause()
        assert layouts == [] and line.size.height == 3


@pytest.mark.asyncio
async def test_a_line_held_while_a_job_runs_keeps_its_most_rows_until_let_go():
    """A hunt's line names each configuration it draws, one row or two: held, what is under it
    stays where it is; let go, the line takes its own rows again."""
    app = OneLine()
    async with app.run_test(size=(60, 20)) as pilot:
        line, below = app.query_one("#line", FittedStatic), app.query_one("#below")
        await wait_for(pilot, lambda: line.size.height == 1)
        line.hold(True)
        line.update("configuration 1: b1 h8 s4096 d128 bf16 BSHD causal\nshrinking finding 1")
        await wait_for(pilot, lambda: line.size.height == 2 and below.region.y == line.region.y + 2)
        line.update("configuration 2: b1 h8 s4096 d128")
        await wait_for(pilot, lambda: "configuration 2" in str(line.render()))
        await pilot.pause()
        assert line.size.height == 2 and below.region.y == line.region.y + 2  # nothing under it moved
        line.hold(False)
        line.update("ended: the budget was spent")
        await wait_for(pilot, lambda: line.size.height == 1 and below.region.y == line.region.y + 1)


class OneStatus(App):
    def compose(self) -> ComposeResult:
        from tui.app.widgets.status import StatusLine

        with VerticalScroll():
            yield StatusLine(id="status")
            yield Static("below", id="below")


@pytest.mark.asyncio
async def test_the_status_line_keeps_its_rows_while_a_job_runs():
    """A hunt's words name each configuration it draws: two rows at 40 columns, then one; while
    the job runs the line keeps two (what is under it stays put), and takes one once it ends."""
    from tui.app.widgets.status import Status, StatusLine

    app = OneStatus()
    async with app.run_test(size=(40, 12)) as pilot:
        line, below = app.query_one(StatusLine), app.query_one("#below")
        line.state = Status().ready(0.1, "")
        await wait_for(pilot, lambda: line.size.height == 1)
        line.state = line.state.sweeping("hunt: configuration 1: b1 h8 s4096 d128 bf16")
        await wait_for(pilot, lambda: line.size.height == 2 and below.region.y == line.region.y + 2)
        line.state = line.state.sweeping("hunt: configuration 2: b1")
        await wait_for(pilot, lambda: "configuration 2" in str(line.render()))
        await pilot.pause()
        assert line.size.height == 2 and below.region.y == line.region.y + 2
        line.state = line.state.sweeping("")  # the job ended
        await wait_for(pilot, lambda: line.size.height == 1 and below.region.y == line.region.y + 1)
