"""The Sweep and History tables at 80x24 and 120x40 cut no cell at the pane's edge: each line of a
table on screen, less each of its cells found whole there, is blank (a cell cut, `1.715 ms (1.9`,
`63% comput`, `su`, `202`, is what is left). The sweep's figures are there whole: each point's
kernel time, TFLOPS and share of peak, and where 120 columns show them each peer's figure; the
History table, scrolled sideways a column at a time (Right), shows every cell of every run whole
at some place.
"""

from __future__ import annotations

import contextlib
import re

import pytest
from fakes import PEERS, FakeEngine, relabelled
from pilot_waits import swept_with_every_peer, wait_for
from test_fit import screen_text
from test_snapshots import kept_runs

from tui.app import make_app
from tui.app.widgets.history import COLUMNS, MARK, row_words

SIZES = [(120, 40), (80, 24)]
PEER_NAMES = ["FLASH", "CUDNN", "MATH", "Flex"]  # the peers that ran in PEERS, a column each


def table_lines(app, selector: str, count: int) -> list[str]:
    """The first `count` lines of the table on screen (its header, then its rows), within its columns."""
    region = app.query_one(selector).region
    lines = screen_text(app).splitlines()
    return [lines[y][region.x : region.right] for y in range(region.y, region.y + count)]


def whole_in(line: str, cell: str) -> bool:
    return bool(re.search(rf"(?<!\S){re.escape(cell)}(?!\S)", line))


def leftover(line: str, cells: list[str]) -> str:
    """The line less each of `cells` found whole in it (the longest first): what is left was cut."""
    for cell in sorted((c for c in cells if c), key=len, reverse=True):
        line = re.sub(rf"(?<!\S){re.escape(cell)}(?!\S)", " " * len(cell), line, count=1)
    return line.strip()


def cut_cells(lines: list[str], rows: list[list[str]]) -> list[str]:
    """Each line with what is left of it once its whole cells are taken away."""
    return [f"{line.strip()!r} cuts {left!r}" for line, row in zip(lines, rows, strict=True)
            if (left := leftover(line, row))]  # fmt: skip


def cells_of(table) -> tuple[list[str], list[list[str]]]:
    """The table's labels and each row's cells, those of the columns a narrow pane leaves out too."""
    every = getattr(table, "every_row", None)  # a FittingTable's; a DataTable holds only what it shows
    if every is None:
        labels = [column.label.plain for column in table.ordered_columns]
        return labels, [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
    return list(table.every_label), [[str(c) for c in row] for row in every]


async def sweep_problems(pilot, size: tuple[int, int]) -> list[str]:
    """The sweep's table at `size`: its lines that cut a cell, and its figures not whole on their row."""
    app = pilot.app
    await pilot.resize_terminal(*size)
    table = app.query_one("#sweep-table")
    heads, rows = cells_of(table)
    named = ["kernel", "TFLOPS", "of peak"] + (PEER_NAMES if size[0] >= 120 else [])
    wanted = [named] + [[row[heads.index(h)] for h in named] for row in rows]

    def missing() -> list[str]:
        lines = table_lines(app, "#sweep-table", len(wanted))
        return [f"{w!r} not whole in {line.strip()!r}" for line, want in zip(lines, wanted, strict=True)
                for w in want if not whole_in(line, w)]  # fmt: skip

    app.query_one("#sweep").scroll_to_widget(table, animate=False, top=True)  # its every row on screen
    with contextlib.suppress(AssertionError):  # where it never is, the problems say what is missing
        await wait_for(pilot, lambda: table.region.right <= size[0] and not missing(), timeout=10)
    return cut_cells(table_lines(app, "#sweep-table", len(wanted)), [heads, *rows]) + missing()


@pytest.mark.asyncio
async def test_the_sweep_table_cuts_no_cell_and_shows_its_figures_whole():
    """llama3-8b-prefill with every peer swept over s = 1024 ... 8192 (the Sweep pane's snapshot):
    at 120x40 every point's figures and cuDNN's speed against each peer, at 80x24 its kernel time,
    TFLOPS and share of peak; no cell cut at either size."""
    fake = FakeEngine(relabelled(PEERS))
    app = make_app(PEERS.config, client=fake)
    problems: dict[str, list[str]] = {}
    try:
        async with app.run_test(size=SIZES[0]) as pilot:
            await swept_with_every_peer(pilot, fake)
            for size in SIZES:
                if found := await sweep_problems(pilot, size):
                    problems[f"{size[0]}x{size[1]}"] = found
    finally:
        fake.close()
    assert problems == {}


@pytest.mark.asyncio
async def test_the_history_table_cuts_no_cell_and_shows_every_cell_whole_scrolled_sideways(
    tmp_path, monkeypatch
):
    """Three kept runs (the History pane's snapshot), at 120x40 and 80x24: at each place Right
    scrolls the table to, no cell is cut; every cell of every run is whole at one of them."""
    monkeypatch.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path / "data"))
    kept_runs()
    app = make_app(PEERS.config, start_engine=False)
    problems: dict[str, list[str]] = {}
    async with app.run_test(size=SIZES[0]) as pilot:
        await pilot.press("f2")
        await wait_for(pilot, lambda: app.pane("history") is not None and len(app.pane("history").rows) == 3)
        table = app.query_one("#history-table")
        table.focus()
        rows = [[*COLUMNS], *([MARK.plain, *row_words(r)] for r in table.rows)]
        for width, height in SIZES:
            await pilot.resize_terminal(width, height)
            await wait_for(pilot, lambda width=width: table.region.right <= width and table.size.width > 0)
            await pilot.press("home")
            await wait_for(pilot, lambda: table.scroll_x == 0)
            seen, found, places = set(), [], 0
            while True:
                await pilot.pause()
                lines = table_lines(app, "#history-table", len(rows))
                found += [f"at x={table.scroll_x}: {cut}" for cut in cut_cells(lines, rows)]
                seen |= {(n, i) for n, row in enumerate(rows) for i, c in enumerate(row)
                         if c and whole_in(lines[n], c)}  # fmt: skip
                if table.scroll_x >= table.max_scroll_x or places > 200:
                    break
                x, places = table.scroll_x, places + 1
                await pilot.press("right")
                await wait_for(pilot, lambda x=x: table.scroll_x != x, timeout=5)
            unseen = [c for n, row in enumerate(rows[1:], 1) for i, c in enumerate(row)
                      if c and c != MARK.plain and (n, i) not in seen]  # fmt: skip
            if found or unseen:
                problems[f"{width}x{height}"] = found[:8] + [f"never whole: {c!r}" for c in unseen]
    assert problems == {}
