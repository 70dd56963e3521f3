"""History: the runs kept in the run history (tui/history.py), newest first, filtered as you type
and read a page at a time (10,000 runs scroll: the next page loads when the cursor reaches the
end). Enter reopens a run's result into the panes; space marks runs, and `c` compares the two
marked (each plan's kernel time with the change in %, errors, versions that differ).

The database is read in thread workers, never on the UI thread; the app opens a result through
the message this pane posts (messages.HistoryOpened).
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from ...engine.results import RunResult
from ...format import status_style, us
from ...history import History, HistoryError, HistoryRow, compare
from ..messages import HistoryOpened

PAGE = 200  # runs read at a time
FILTER_PAUSE_S = 0.2  # typing "h200" reads once, not four times
COLUMNS = ("", "id", "when", "status", "kernel", "GPU, cuDNN", "preset: configuration")  # the figures first
HINT = "Enter: open · space: mark · c: compare two"


def row_cells(r: HistoryRow, marked: bool) -> tuple:
    """One run as the table shows it (the configuration last: the one column that may run off)."""
    timed = "-" if r.kernel_us is None else f"{us(r.kernel_us)} {r.regime}".rstrip()
    gpu = " ".join(part for part in (r.gpu.removeprefix("NVIDIA "), r.cudnn) if part) or "-"
    named = Text.assemble((f"{r.preset}: ", "bold") if r.preset else "", r.label)
    return ("●" if marked else "", str(r.id), r.when[2:16], Text(r.status, style=status_style(r.status)),
            timed, gpu, named)  # fmt: skip


class HistoryTable(DataTable):
    BINDINGS = [
        Binding("space", "mark", "Mark", show=False),
        Binding("c", "compare", "Compare", show=False),
    ]

    def action_mark(self) -> None:
        self.pane.toggle_mark()

    def action_compare(self) -> None:
        self.pane.compare_marked()

    @property
    def pane(self) -> HistoryPane:
        return next(a for a in self.ancestors if isinstance(a, HistoryPane))


class HistoryPane(Vertical):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: list[HistoryRow] = []
        self.total = 0
        self.search = ""
        self.marked: list[int] = []  # run ids, in the order marked
        self.loading = False
        self._pause: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: label, preset, status, GPU or version", id="history-filter")
        table = HistoryTable(id="history-table", cursor_type="row", zebra_stripes=True)
        for name in COLUMNS:
            table.add_column(name, key=name or "mark", width=None if name else 1)
        yield table
        yield Static(HINT, id="history-note")
        with VerticalScroll(id="history-compare"):
            yield Static("", id="history-comparison")

    def on_mount(self) -> None:
        self.watch(self.table, "scroll_y", self._scrolled, init=False)
        self.reload()

    @property
    def table(self) -> HistoryTable:
        return self.query_one(HistoryTable)

    # ---- reading (thread workers) -------------------------------------------------------------
    def reload(self) -> None:
        """Read the first page again (the filter changed, or a run was recorded)."""
        self.run_worker(lambda: self._read(self.search, 0), thread=True, exclusive=True, group="history-read")

    def _read(self, search: str, offset: int) -> None:
        try:
            with History() as history:
                rows = history.runs(PAGE, offset, search)
                total = history.count(search) if offset == 0 else None
        except HistoryError as exc:
            self.app.call_from_thread(self._note, f"the history cannot be read: {exc}")
            return
        self.app.call_from_thread(self._rows_read, search, offset, rows, total)

    def _rows_read(self, search: str, offset: int, rows: list[HistoryRow], total: int | None) -> None:
        if search != self.search:
            return  # an older filter's answer
        table = self.table
        if offset == 0:
            self.rows = []
            table.clear()
            self.total = total or 0
        elif offset != len(self.rows):
            return  # a page already read, or one of a list read again since
        self.loading = False
        self.rows += rows
        for r in rows:
            table.add_row(*row_cells(r, r.id in self.marked), key=str(r.id))
        self._note()

    def _note(self, problem: str = "") -> None:
        shown = f"{len(self.rows)} of {self.total} runs" + (
            f" matching “{self.search}”" if self.search else ""
        )
        marked = f" · marked {', '.join(f'#{i}' for i in self.marked)}" if self.marked else ""
        self.query_one("#history-note", Static).update(Text(problem or f"{shown}{marked} · {HINT}"))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self._pause is not None:
            self._pause.stop()
        self._pause = self.set_timer(FILTER_PAUSE_S, lambda: self._filter(event.value.strip()))

    def _filter(self, search: str) -> None:
        self._pause = None
        if search != self.search:
            self.search = search
            self.reload()

    @property
    def filter_pending(self) -> bool:
        return self._pause is not None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor at the end of what is read: read the next page."""
        if event.cursor_row >= len(self.rows) - 1:
            self._more()

    def _scrolled(self, _y: float) -> None:
        """Scrolled (wheel, End) to the end of what is read: read the next page."""
        table = self.table
        if table.scroll_y >= table.max_scroll_y:
            self._more()

    def _more(self) -> None:
        if len(self.rows) < self.total and not self.loading:
            self.loading = True
            search, offset = self.search, len(self.rows)
            self.run_worker(lambda: self._read(search, offset), thread=True, group="history-page")

    # ---- a run: open, mark, compare -------------------------------------------------------------
    def _cursor_id(self) -> int | None:
        row = self.table.cursor_row
        return self.rows[row].id if 0 <= row < len(self.rows) else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        run_id = int(str(event.row_key.value))
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
        for r in self.rows:
            self.table.update_cell(str(r.id), "mark", "●" if r.id in self.marked else "")
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
        from ...cli_history import comparison_renderables

        parts = comparison_renderables(compare(a, b), a_name, b_name)
        self.query_one("#history-comparison", Static).update(Group(*parts))
        self.add_class("-comparing")
