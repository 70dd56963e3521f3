"""History: the runs kept in the run history (tui/store/history.py), newest first, filtered as you type
and read a page at a time (10,000 runs scroll: the next page is read as the cursor nears the end
of what is read). Enter reopens a run's result into the panes; space marks runs, and `c` compares
the two marked (each plan's kernel time with the change in %, errors, versions that differ).

The database is read in thread workers, never on the UI thread, one first page at a time: a key
typed while one is read is read next, not queued behind stale ones. The app opens a result
through the message this pane posts (messages.HistoryOpened).
"""

from __future__ import annotations

from itertools import accumulate

from rich.cells import cell_len
from rich.console import Console, Group
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Region, Size, Spacing
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import DataTable, Input, Static

from ...model.results import RunResult
from ...present.format import status_style, us
from ...store.history import History, HistoryError, HistoryRow, compare
from ..messages import HistoryOpened
from ..navigation import PaneKeysInput
from .fitted import FittedStatic

PAGE = 200  # runs read at a time
LINES_KEPT = 200  # lines drawn, kept for the cursor's moves and scrolling back: a few screens
# the figures first, then the preset's name, so that 80 columns show them whole; the rest scrolls
COLUMNS = ("", "id", "status", "kernel", "preset", "regime", "when", "GPU, cuDNN", "configuration")
HINT = "Enter: open · space: mark · c: compare two"
MARK, UNMARKED = Text("●"), Text()


def row_words(r: HistoryRow) -> tuple[str, ...]:
    """One run as the table shows it, after its mark (the configuration last: the columns after
    the preset may run off a narrow pane)."""
    timed = "-" if r.kernel_us is None else us(r.kernel_us)
    gpu = " ".join(part for part in (r.gpu.removeprefix("NVIDIA "), r.cudnn) if part) or "-"
    return str(r.id), r.status, timed, r.preset or "-", r.regime or "-", r.when[:16], gpu, r.label


def row_cells(r: HistoryRow) -> list[Text]:
    """row_words in their styles: the status's colour, the preset in bold."""
    number, status, timed, preset, regime, when, gpu, label = row_words(r)
    return [Text(number), Text(status, style=status_style(status)), Text(timed),
            Text(preset, style="bold" if r.preset else ""), Text(regime), Text(when), Text(gpu), Text(label)]  # fmt: skip


def cell_segments(console: Console, cell: Text) -> list[tuple[str, Style | None]]:
    """A cell's text and styles, its own style included where it has no spans (Text.render
    leaves that to __rich_console__)."""
    if not cell.spans:
        return [(cell.plain, console.get_style(cell.style) if cell.style else None)]
    return [(segment.text, segment.style) for segment in cell.render(console, end="")]


class HistoryTable(ScrollView, can_focus=True):
    """The runs, a line each, drawn from the rows read and only the lines on screen: a DataTable
    renders every cell through Rich and measures every row it is given (a filtered page cost
    150 ms of each key). It looks and answers as a DataTable with a row cursor and zebra stripes:
    its styles, its keys, a click opens a run. Scrolled sideways it shows only the columns whole on
    screen, never a figure cut at an edge; left and right scroll a column at a time."""

    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES
    DEFAULT_CSS = DataTable.DEFAULT_CSS.replace("DataTable", "HistoryTable")
    BINDINGS = [
        Binding("enter", "select", "Open", show=False),
        Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("ctrl+home", "move_to(0)", show=False),
        Binding("ctrl+end", "move_to(-1)", show=False),
        Binding("home", "scroll_home", show=False),
        Binding("end", "scroll_end", show=False),
        Binding("space", "mark", "Mark", show=False),
        Binding("c", "compare", "Compare", show=False),
    ]
    cursor_row: reactive[int] = reactive(0, always_update=True)
    hover_row: reactive[int | None] = reactive(None)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.labels = [Text.from_markup(name) for name in COLUMNS]
        self.widths = [1, *(label.cell_len for label in self.labels[1:])]  # each only grows, as a DataTable's
        self.rows: list[HistoryRow] = []
        self.marked: set[int] = set()
        self._lines: LRUCache[tuple, Strip] = LRUCache(LINES_KEPT)  # (row, cursor, hover, marked, x, room)
        self._base: Style | None = None

    @property
    def pane(self) -> HistoryPane:
        return next(a for a in self.ancestors if isinstance(a, HistoryPane))

    @property
    def row_count(self) -> int:
        return len(self.rows)

    # ---- rows -----------------------------------------------------------------------------------
    def show_rows(self, rows: list[HistoryRow], append: bool = False) -> None:
        """The rows read (a first page, or `append`: the next); only lines drawn are styled."""
        self.rows = self.rows + rows if append else rows
        widths = list(self.widths)
        for words in map(row_words, rows):
            widths[1:] = map(max, widths[1:], map(cell_len, words))
        if widths != self.widths or not append:
            self.widths = widths
            self._lines.clear()
        self.virtual_size = Size(sum(w + 2 for w in self.widths), len(self.rows) + 1)
        if not append:
            self.scroll_to(0, 0, animate=False, force=True)
            self.cursor_row = 0
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines.clear()
        self._base = None

    def on_resize(self) -> None:
        self._lines.clear()  # the line's filler depends on the width

    # ---- drawing --------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self._base is None:
            self._base = self.rich_style
        row = y - 1 + int(self.scroll_y) if y else -1
        if row >= len(self.rows):
            return Strip.blank(width, self._base)
        marked = row >= 0 and self.rows[row].id in self.marked
        x, room = int(self.scroll_x), self.scrollable_content_region.width  # room: less a scrollbar
        key = (row, row == self.cursor_row, row == self.hover_row, marked, x, room)
        line = self._lines.get(key)
        if line is None:  # its equal segments joined, then cropped: as a DataTable's after its crop
            line = self._lines[key] = Strip(Segment.simplify(self._line(*key[:5]))).crop(x, x + width)
        return line

    def starts(self) -> list[int]:
        """Where each column begins on the line, its padding included."""
        return [0, *accumulate(w + 2 for w in self.widths[:-1])]

    def _whole(self, x: int, start: int, width: int, cell: Text) -> bool:
        """Whether a cell of the column at `start`, `width` wide, is whole on screen at `x`: all or none
        of a column (one wider than the screen: each cell, one wider still at its left edge)."""
        room = self.scrollable_content_region.width  # less a scrollbar
        if width + 2 > room and (width := cell.cell_len) + 2 > room:
            return start <= x <= start + 1
        return x <= start + 1 and start + 1 + width <= x + room

    def _line(self, row: int, cursor: bool, hover: bool, marked: bool, x: int = 0) -> list[Segment]:
        """A row's segments as a DataTable draws them: each cell padded by one on either side in the
        row's style (the header's, or a zebra stripe's), the cursor's colour over the cell's own; a
        cell of a column not whole on screen at `x` is left blank."""
        get = self.get_component_rich_style
        if row < 0:
            row_style, cells = get("datatable--header"), self.labels
        else:
            row_style = get("datatable--odd-row" if row % 2 else "datatable--even-row")
            cells = [MARK if marked else UNMARKED, *row_cells(self.rows[row])]
        lit = Style()
        if hover:
            lit += get("datatable--hover")
        if cursor:
            lit += get("datatable--cursor")
        # the cursor's colour over the cell's (a null style elsewhere)
        post = Style.from_color(color=lit.color)
        console, segments, lined = self.app.console, [], row_style + lit
        for column, (cell, width, start) in enumerate(zip(cells, self.widths, self.starts(), strict=True)):
            pre = lined + Style.from_meta({"row": row, "column": column})
            edge = pre + post
            if not self._whole(x, start, width, cell):
                segments.append(Segment(" " * (width + 2), edge))
                continue
            segments.append(Segment(" ", edge))
            for text, style in cell_segments(console, cell):
                segments.append(Segment(text, pre + style + post if style else edge))
            segments.append(Segment(" " * (width - cell_len(cell.plain) + 1), edge))
        filler = max(0, self.size.width - sum(w + 2 for w in self.widths))
        outside = Style.from_meta({"row": row, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * filler, lined + outside))
        return segments

    def _refresh_row(self, row: int | None) -> None:
        if row is not None:
            self.refresh(Region(0, row + 1 - int(self.scroll_y), self.size.width, 1))

    # ---- the cursor -----------------------------------------------------------------------------
    def validate_cursor_row(self, row: int) -> int:
        return max(0, min(row, len(self.rows) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._refresh_row(old)
        self._refresh_row(new)
        width = max(self.size.width, self.virtual_size.width)
        self.scroll_to_region(
            Region(int(self.scroll_x), new + 1, width, 1),
            animate=False,
            spacing=Spacing(1, 0, 0, 0),
            force=True,
        )
        if self.rows:
            self.pane.cursor_moved(new)

    def watch_hover_row(self, old: int | None, new: int | None) -> None:
        self._refresh_row(old)
        self._refresh_row(new)

    def move_cursor(self, *, row: int) -> None:
        self.cursor_row = row

    def action_move(self, step: int) -> None:
        self.hover_row = None
        self.cursor_row += step

    def action_move_to(self, row: int) -> None:
        self.hover_row = None
        self.cursor_row = row if row >= 0 else len(self.rows) - 1

    def action_page(self, direction: int) -> None:
        """A screen of rows at a time, the cursor where it was on the screen, as a DataTable's."""
        self.hover_row = None
        height = max(1, self.size.height - self.scrollbar_size_horizontal - 1)  # the lines under the header
        self.scroll_relative(y=direction * height, animate=False, force=True)
        self.cursor_row += direction * height

    def action_scroll_home(self) -> None:
        self.scroll_x = 0

    def action_scroll_left(self) -> None:
        """The column before the first whole one comes in at the left edge."""
        self.scroll_x = max([s for s in self.starts() if s < self.scroll_x], default=0)

    def action_scroll_right(self) -> None:
        """The first column on screen leaves at the left edge: the next comes in at the right."""
        later = [s for s in self.starts() if s > self.scroll_x]
        self.scroll_x = max(self.scroll_x, min([*later, self._end_x()]))

    def action_scroll_end(self) -> None:
        self.scroll_x = self._end_x()

    def _end_x(self) -> float:
        """Where End scrolls to: the last column at the right edge, or its start if wider than the screen."""
        wide = self.widths[-1] + 2 > self.scrollable_content_region.width
        return min(self.max_scroll_x, self.starts()[-1]) if wide else self.max_scroll_x

    def action_select(self) -> None:
        self.hover_row = None
        if self.rows:
            self.pane.open_run(self.rows[self.cursor_row].id)

    def action_mark(self) -> None:
        self.pane.toggle_mark()

    def action_compare(self) -> None:
        self.pane.compare_marked()

    def on_click(self, event: events.Click) -> None:
        row = event.style.meta.get("row")
        if row is not None and 0 <= row < len(self.rows):
            event.stop()
            self.cursor_row = row
            self.action_select()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        row = event.style.meta.get("row")
        self.hover_row = row if row is not None and row >= 0 else None

    def on_leave(self, _event: events.Leave) -> None:
        self.hover_row = None


class HistoryPane(Vertical):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.table = HistoryTable(id="history-table")
        self.total = 0
        self.search = ""  # the filter the rows shown match
        self.typed = ""  # the filter as typed: read once the read under way is done
        self.marked: list[int] = []  # run ids, in the order marked
        # a next page is being read (not Widget.loading: that covers the pane with an indicator)
        self.paging = False
        self._reading: str | None = None  # the filter whose first page is being read
        self._stale = False  # the list is to be read again (a run was recorded)
        self._listing = 0  # which reading of the list the rows belong to: pages of an older one are dropped

    def compose(self) -> ComposeResult:
        yield PaneKeysInput(placeholder="filter: label, preset, status, GPU or version", id="history-filter")
        yield self.table
        yield FittedStatic(HINT, id="history-note")
        with VerticalScroll(id="history-compare"):
            yield FittedStatic("", id="history-comparison")

    def on_mount(self) -> None:
        self.watch(self.table, "scroll_y", self._scrolled, init=False)
        self.reload()

    @property
    def rows(self) -> list[HistoryRow]:
        """The runs read, newest first."""
        return self.table.rows

    # ---- reading (thread workers) -------------------------------------------------------------
    def reload(self) -> None:
        """Read the first page again (a run was recorded)."""
        self._stale = True
        self._read_next()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.typed = event.value.strip()
        self._read_next()

    def _read_next(self) -> None:
        """Read the first page of the filter as typed, unless one is being read: when it is done,
        this runs again, so keys typed meanwhile cost one read, not one each."""
        if self._reading is not None or (self.typed == self.search and not self._stale):
            return
        search = self._reading = self.typed
        self._stale = False
        self.run_worker(lambda: self._read(search, 0, 0), thread=True, group="history-read")

    @property
    def filter_pending(self) -> bool:
        """A filter typed whose runs are not shown yet."""
        return self._reading is not None or self.typed != self.search

    def _read(self, search: str, offset: int, listing: int) -> None:
        try:
            with History() as history:
                rows = history.runs(PAGE, offset, search)
                total = history.count(search) if offset == 0 else None
        except HistoryError as exc:
            self.app.call_from_thread(self._read_failed, offset, f"the history cannot be read: {exc}")
            return
        self.app.call_from_thread(self._rows_read, search, offset, listing, rows, total)

    def _read_failed(self, offset: int, problem: str) -> None:
        if offset == 0:
            self._reading = None
        else:
            self.paging = False
        self._note(problem)

    def _rows_read(
        self, search: str, offset: int, listing: int, rows: list[HistoryRow], total: int | None
    ) -> None:
        if offset == 0:
            self._reading = None
            self.search, self.total = search, total or 0
            self._listing += 1
            self.paging = False
            self.table.show_rows(rows)
            self._read_next()  # typed meanwhile
        elif listing == self._listing and offset == len(self.rows):
            self.paging = False
            self.table.show_rows(rows, append=True)
        else:
            return  # a page of a list read again since
        self._note()

    def _note(self, problem: str = "") -> None:
        shown = f"{len(self.rows)} of {self.total} runs" + (
            f" matching “{self.search}”" if self.search else ""
        )
        marked = f" · marked {', '.join(f'#{i}' for i in self.marked)}" if self.marked else ""
        line = problem or f"{shown}{marked} · {HINT}"
        self.query_one("#history-note", FittedStatic).update(Text(line))  # laid out only if its rows change

    def cursor_moved(self, row: int) -> None:
        """The cursor within a screen of the end of what is read: read the next page."""
        if row >= len(self.rows) - max(1, self.table.size.height):
            self._more()

    def _scrolled(self, _y: float) -> None:
        """Scrolled (wheel, End) to the end of what is read: read the next page."""
        table = self.table
        if table.scroll_y >= table.max_scroll_y:
            self._more()

    def _more(self) -> None:
        if len(self.rows) < self.total and not self.paging and self._reading is None:
            self.paging = True
            search, offset, listing = self.search, len(self.rows), self._listing
            self.run_worker(lambda: self._read(search, offset, listing), thread=True, group="history-page")

    # ---- a run: open, mark, compare -------------------------------------------------------------
    def _cursor_id(self) -> int | None:
        row = self.table.cursor_row
        return self.rows[row].id if 0 <= row < len(self.rows) else None

    def open_run(self, run_id: int) -> None:
        self.run_worker(lambda: self._load(run_id), thread=True, group="history-open")

    def _load(self, run_id: int) -> None:
        try:
            with History() as history:
                result = history.load(run_id)
        except (KeyError, HistoryError) as exc:
            self.app.call_from_thread(self._note, f"run #{run_id} cannot be opened: {exc}")
            return
        self.app.call_from_thread(self.post_message, HistoryOpened(run_id, result))

    def toggle_mark(self) -> None:
        run_id = self._cursor_id()
        if run_id is None:
            return
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked = [*self.marked, run_id][-2:]  # the two newest marks
        self.table.marked = set(self.marked)
        self.table.refresh()
        self._note()

    def compare_marked(self) -> None:
        if len(self.marked) != 2:
            self._note("mark two runs (space) to compare them")
            return
        a, b = sorted(self.marked)  # the older is A
        self.run_worker(lambda: self._compare(a, b), thread=True, exclusive=True, group="history-compare")

    def _compare(self, a: int, b: int) -> None:
        try:
            with History() as history:
                found = (history.load(a), history.load(b))
        except (KeyError, HistoryError) as exc:
            self.app.call_from_thread(self._note, f"cannot compare #{a} and #{b}: {exc}")
            return
        self.app.call_from_thread(self.show_comparison, found[0], found[1], f"#{a}", f"#{b}")

    def show_comparison(self, a: RunResult, b: RunResult, a_name: str, b_name: str) -> None:
        from ...present.comparison import comparison_renderables

        parts = comparison_renderables(compare(a, b), a_name, b_name)
        self.query_one("#history-comparison", Static).update(Group(*parts))
        self.add_class("-comparing")
