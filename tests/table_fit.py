"""Reading a table on screen for cut cells (the Sweep, History, Hunt and Search tables, whose tests
in test_snapshots.py read them in the app that took their snapshots: a dashboard start each saved).

Each line of a table on screen, less each of its cells found whole there, is blank (a cell cut,
`1.715 ms (1.9`, `63% comput`, `su`, `202`, is what is left); a row wrapped onto several lines is
read as one, a cell wrapped at its spaces found by its words in turn.
"""

from __future__ import annotations

import contextlib
import re

from pilot_waits import wait_for
from test_fit import screen_text

from tui.app.widgets.history import COLUMNS, MARK, row_words

SIZES = [(120, 40), (80, 24)]  # each table is read at both, the wider first
PEER_NAMES = ["FLASH", "CUDNN", "MATH", "Flex"]  # the peers that ran in PEERS, a column each


def table_lines(app, selector: str, count: int) -> list[str]:
    """The first `count` lines of the table on screen (its header, then its rows), within its columns."""
    region = app.query_one(selector).region
    lines = screen_text(app).splitlines()
    return [lines[y][region.x : region.right] for y in range(region.y, region.y + count)]


def row_lines(app, selector: str) -> list[str | None]:
    """The table's header, then each of its rows, as the screen shows them within its columns (a
    row of several lines, its lines joined); None for one its pane does not show whole."""
    table = app.query_one(selector)
    region, view = table.region, table.parent.region
    screen = screen_text(app).splitlines()
    heights = [table.header_height] + [row.height for row in table.ordered_rows]
    starts = [region.y + sum(heights[:n]) for n in range(len(heights))]
    return ["\n".join(screen[y][region.x : region.right] for y in range(start, start + height))
            if view.y <= start and start + height <= view.bottom else None
            for start, height in zip(starts, heights, strict=True)]  # fmt: skip


def whole_in(line: str, cell: str) -> bool:
    return bool(re.search(rf"(?<!\S){re.escape(cell)}(?!\S)", line))


def said_in(lines: str, cell: str) -> bool:
    """`cell` whole on one of a row's lines, or its words in turn, wrapped at its spaces onto the
    lines after (the row's other cells between)."""
    gap = r"(?: |(?:\s[^\n]*)?\n(?:[^\n]*\s)?)"
    words = gap.join(re.escape(word) for word in cell.split())
    return whole_in(lines, cell) or bool(re.search(rf"(?<!\S){words}(?!\S)", lines))


def leftover(line: str, cells: list[str]) -> str:
    """The line less each of `cells` found whole in it (the longest first), or in a row of several
    lines wrapped at its spaces: what is left was cut."""
    for cell in sorted((c for c in cells if c), key=len, reverse=True):
        line, found = re.subn(rf"(?<!\S){re.escape(cell)}(?!\S)", " " * len(cell), line, count=1)
        if not found and "\n" in line and said_in(line, cell):
            for word in cell.split():
                line = re.sub(rf"(?<!\S){re.escape(word)}(?!\S)", " " * len(word), line, count=1)
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


async def read_table(pilot, size: tuple[int, int], selector: str, named: list[str]) -> tuple[list[str], list]:
    """The table `selector` at `size`, read a page of its pane at a time from its top: its lines that
    cut a cell, the cells of the columns `named` not whole on their row, the rows never on screen
    whole; and the lines it showed (its header's, then each row's)."""
    app = pilot.app
    await pilot.resize_terminal(*size)
    table = app.query_one(selector)
    pane = table.parent
    heads, rows = cells_of(table)
    wanted = [named] + [[row[heads.index(h)] for h in named] for row in rows]

    def missing(lines: list[str | None]) -> list[str]:
        return [f"{w!r} not whole in {line.strip()!r}" for line, want in zip(lines, wanted, strict=True)
                if line is not None for w in want if not said_in(line, w)]  # fmt: skip

    def shown() -> bool:
        lines = row_lines(app, selector)
        return table.region.right <= size[0] and any(lines) and not missing(lines)

    with contextlib.suppress(AssertionError):  # laid out at the new size (a table wider than it cuts)
        await wait_for(pilot, lambda: app.size == size and table.region.right <= size[0], timeout=10)
    await pilot.pause()
    pane.scroll_to_widget(table, animate=False, top=True)
    seen: dict[int, str] = {}
    while True:
        with contextlib.suppress(AssertionError):  # where it never is, the problems say what is missing
            await wait_for(pilot, shown, timeout=10)
        seen = {n: line for n, line in enumerate(row_lines(app, selector)) if line is not None} | seen
        y, tallest = pane.scroll_y, max((row.height for row in table.ordered_rows), default=1)
        if len(seen) == len(wanted) or y >= pane.max_scroll_y:
            break
        pane.scroll_to(y=y + max(pane.scrollable_content_region.height - tallest, 1), animate=False)
        await wait_for(pilot, lambda y=y: pane.scroll_y != y, timeout=5)
    lines = [seen.get(n) for n in range(len(wanted))]
    read = [(line, row) for line, row in zip(lines, [heads, *rows], strict=True) if line is not None]
    unseen = [f"row {n} never whole on screen" for n, line in enumerate(lines) if line is None]
    return cut_cells(*zip(*read, strict=True)) + missing(lines) + unseen, lines


async def table_problems(pilot, size: tuple[int, int], selector: str, named: list[str]) -> list[str]:
    return (await read_table(pilot, size, selector, named))[0]


async def sweep_problems(pilot, size: tuple[int, int]) -> list[str]:
    """The sweep's table at `size`: its lines that cut a cell, and its figures not whole on their row."""
    named = ["kernel", "TFLOPS", "of peak"] + (PEER_NAMES if size[0] >= 120 else [])
    return await table_problems(pilot, size, "#sweep-table", named)


async def sizes_problems(pilot, problems_at) -> dict[str, list[str]]:
    """What `problems_at(pilot, size)` finds at each of SIZES, by size; {} where it finds nothing."""
    found = {f"{w}x{h}": await problems_at(pilot, (w, h)) for w, h in SIZES}
    return {size: problems for size, problems in found.items() if problems}


async def findings_problems(pilot, size: tuple[int, int]) -> list[str]:
    """The Hunt pane's findings at `size`: no cell cut, each finding's whose, failure and signature
    whole on its row (wrapped at their spaces at 80x24), and its minimal configuration whole there
    or under the table, named as the CLI names it."""
    app = pilot.app
    found, lines = await read_table(pilot, size, "#hunt-table", ["whose", "failure", "signature"])
    _heads, rows = cells_of(app.query_one("#hunt-table"))
    below = app.query("#hunt-below").first() if app.query("#hunt-below") else None
    under = str(below.render()).splitlines() if below is not None and below.display else []
    return found + [f"minimal configuration {row[-1]!r} neither in its row nor under the table"
                    for row, line in zip(rows, lines[1:], strict=True)
                    if not whole_in(line or "", row[-1]) and f"minimal (finding {row[0]}): {row[-1]}" not in under]  # fmt: skip


async def candidates_problems(pilot, size: tuple[int, int]) -> list[str]:
    """The Search pane's candidates at `size`: no cell cut, each one's plan, time and status whole on
    its row, and at 120 columns its max abs error too."""
    named = ["plan", "time", "status"] + ["max abs err"] * (size[0] >= 120)
    return await table_problems(pilot, size, "#search-table", named)


async def history_problems(pilot, size: tuple[int, int]) -> list[str]:
    """The History table at `size`: at each place Right scrolls it to, no cell cut; every cell of
    every run whole at one of them."""
    app = pilot.app
    width, height = size
    table = app.query_one("#history-table")
    table.focus()
    rows = [[*COLUMNS], *([MARK.plain, *row_words(r)] for r in table.rows)]
    await pilot.resize_terminal(width, height)
    await wait_for(pilot, lambda: table.region.right <= width and table.size.width > 0)
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
    return found[:8] + [f"never whole: {c!r}" for c in unseen]
