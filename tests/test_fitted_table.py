"""A table of auto height follows its rows even when the screen laid it out before it measured
them (the Explain grid stayed empty in one start of eight on a loaded machine)."""

from __future__ import annotations

import pytest
from pilot_waits import wait_for
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.app.widgets.fitted import FittedTable


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
