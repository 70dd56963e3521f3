"""Widgets of auto height laid out exactly when that height changes.

A line of words (FittedStatic): Textual lays the whole screen out at every update of a Static,
whether its height changed or not; a pane saying its progress, a head line or the headline cost a
full layout and paint of the screen at each new word. The line is repainted alone when its words
take as many rows as before, and laid out when they do not, once for each new height (a line
its container holds taller than its words, the Hunt pane's, asked again at every word).

A table (FittedTable): a DataTable of `height: auto` measures its rows when it is next idle,
after they were added. If the screen laid it out in between (a layout the clearing asked for, with
the old rows' height) Textual kept that height under the same layout count, and the later request
for a layout, made while the first was still pending, did not move the count on: the table stayed
at its old height (none, for a table filled once) until something else laid the screen out. Seen
as an empty Explain grid in one start of eight on a loaded machine. A new height asks for a layout
once more, after the screen's next refresh, when the earlier request is spent.

A table that fits (FittingTable): a DataTable wider than its pane scrolls sideways, and the pane
shows a column cut at its edge; this one leaves out its least needed columns (notes first) instead.
A table whose columns change with its rows (the Sweep pane's peers) names those that may go in
`drops`, and hears of each change of the columns shown in `refitted`. Its words columns (WRAPS:
a failure, a signature) wrap at their spaces where the columns left still run past its width,
a row as tall as its most wrapped cell.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Size
from textual.visual import VisualType
from textual.widgets import DataTable, Static


class FittedStatic(Static):
    """A Static that asks for a layout only when new content changes its height."""

    _asked: tuple[int, int] = (0, 0)  # the width and rows of the last measure (a layout was asked for them)
    _holding = False  # a job runs: the line keeps its rows (hold)
    _held = 0  # the most rows its words took while held

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(content, layout=False)
        if layout and self._height_may_change():
            self.refresh(layout=True)

    def _height_may_change(self) -> bool:
        width, height = self.size
        styles = self.styles
        if not width or (styles.width is not None and styles.width.is_auto):
            return True  # not laid out yet, or its width follows its words
        if styles.height is not None and not styles.height.is_auto:
            return False  # a height of its own: words move nothing
        rows = self.rows_wanted(self.get_content_height(self.size, self.app.size, width))
        asked, self._asked = self._asked, (width, rows)
        return rows != height and asked != (width, rows)

    def rows_wanted(self, rows: int) -> int:
        """The rows to lay the line out in, for words that take `rows`: while held, the most so far."""
        if self._holding and rows > self._held:
            self._held = rows
            self.styles.min_height = rows
        return max(rows, self._held)

    def hold(self, holding: bool) -> None:
        """While a job runs, keep the most rows its words have taken: a line that changes height
        with each configuration a hunt or a sweep draws makes everything under it jump."""
        self._holding = holding
        if not holding and self._held:
            self._held = 0
            self.styles.min_height = None


class FittedTable(DataTable):
    """A DataTable whose auto height always follows its rows."""

    def watch_virtual_size(self, old: Size, new: Size) -> None:
        if new.height != old.height:
            self.call_after_refresh(self.refresh, layout=True)


class FittingTable(FittedTable):
    """A FittedTable that shows the columns its width holds: those named in DROPS go, the first
    named first, before the table would run past its width and cut a figure at the edge; then
    those named in WRAPS wrap their words. The rows keep every cell; a wider table shows the
    dropped columns again, unwrapped."""

    DROPS: ClassVar[tuple[str, ...]] = ()  # the labels of the columns that may go, in the order they go
    WRAPS: ClassVar[tuple[str, ...]] = ()  # the labels of the words columns that may wrap at their spaces

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.drops: tuple[str, ...] = self.DROPS  # a table whose columns change sets its own
        self._labels: tuple[str, ...] = ()  # every column, in order
        self._rows: list[tuple[tuple, Any]] = []  # every row's cells and key
        self._shown: tuple[int, ...] = ()  # the columns shown, by index
        self._wraps: dict[int, int] = {}  # the width each wrapped column's words wrap to, by index
        self._refit_asked = False

    def add_columns(self, *labels: Any) -> list:
        """Until rows come the columns that may go are not shown: the first frame is the final one."""
        self._labels += tuple(str(label) for label in labels)
        self._shown = tuple(i for i, label in enumerate(self._labels) if label not in self.drops)
        return super().add_columns(*(labels[i] for i in self._shown))

    def add_row(self, *cells: Any, key: str | None = None, **kwargs: Any):
        self._rows.append((cells, key))
        shown, height = self._row(cells)
        row = super().add_row(*shown, key=key, height=height, **kwargs)
        self._ask_refit()
        return row

    def update_cell_of(self, key: str, label: str, value: Any) -> None:
        """The row `key`'s cell in the column `label` is now `value`, that column on show or not."""
        i = self._labels.index(label)
        self._rows = [((*c[:i], value, *c[i + 1 :]) if k == key else c, k) for c, k in self._rows]
        if i in self._shown:
            column = self.ordered_columns[self._shown.index(i)].key
            self.update_cell(key, column, self._wrapped(i, value), update_width=True)
        self._ask_refit()

    def clear(self, columns: bool = False):
        self._rows = []
        if columns:
            self._labels, self._shown, self._wraps = (), (), {}
        return super().clear(columns)

    @property
    def every_label(self) -> tuple[str, ...]:
        """Each column's label, those of the columns left out too."""
        return self._labels

    @property
    def shown_labels(self) -> tuple[str, ...]:
        """The labels of the columns on show."""
        return tuple(self._labels[i] for i in self._shown)

    @property
    def every_row(self) -> list[tuple]:
        """Each row's cells, those of the columns left out too."""
        return [cells for cells, _key in self._rows]

    def on_resize(self) -> None:
        self._ask_refit()

    def _ask_refit(self) -> None:
        if not self._refit_asked:
            self._refit_asked = True
            self.call_later(self._refit)

    def fitting(self, width: int) -> tuple[tuple[int, ...], dict[int, int]]:
        """The columns shown in `width` cells: every one, less `drops` in turn until they fit; and
        where they still do not, the width each words column (WRAPS) wraps to, the widest narrowed
        first, none narrower than its label or its longest word."""
        pad = 2 * self.cell_padding
        need = [cell_len(label) + pad for label in self._labels]
        least = list(need)
        for cells, _key in self._rows:
            for i, cell in enumerate(cells):
                need[i] = max(need[i], _cell_width(cell) + pad)
                least[i] = max(least[i], _word_width(cell) + pad)
        shown = list(range(len(self._labels)))
        for label in self.drops:
            if sum(need[i] for i in shown) <= width:
                break
            shown = [i for i in shown if self._labels[i] != label]
        widths = {i: need[i] for i in shown if self._labels[i] in self.WRAPS}
        over = sum(need[i] for i in shown) - width
        while over > 0 and (narrowing := [i for i, w in widths.items() if w > least[i]]):
            widths[max(narrowing, key=widths.__getitem__)] -= 1
            over -= 1
        return tuple(shown), {i: w - pad for i, w in widths.items() if w < need[i]}

    def refit(self) -> None:
        """Show the columns that fit now, where the width is known (not after the next frame)."""
        self._refit()

    def refitted(self) -> None:
        """The columns shown changed (the width, or the rows)."""

    def _refit(self) -> None:
        self._refit_asked = False
        width = self.scrollable_content_region.width
        if not width or not self._rows:
            return
        fit = self.fitting(width)
        if fit == (self._shown, self._wraps):
            return
        self._shown, self._wraps = fit
        cursor, rows = self.cursor_coordinate, self._rows
        DataTable.clear(self, columns=True)
        for i in self._shown:
            DataTable.add_column(self, self._labels[i])
        for cells, key in rows:
            shown, height = self._row(cells)
            DataTable.add_row(self, *shown, key=key, height=height)
        if rows and self.cursor_type != "none":
            self.move_cursor(row=min(cursor.row, len(rows) - 1), animate=False)
        self.refitted()

    def _row(self, cells: tuple) -> tuple[tuple, int]:
        """A row's cells on show, a words column's wrapped to its width, and the lines the row
        takes: one, or as many as its most wrapped cell's."""
        shown = tuple(self._wrapped(i, cells[i]) for i in self._shown)
        wrapped = (cell for i, cell in zip(self._shown, shown, strict=True) if i in self._wraps)
        return shown, max((cell.plain.count("\n") + 1 for cell in wrapped), default=1)

    def _wrapped(self, i: int, cell: Any) -> Any:
        width = self._wraps.get(i)
        if width is None:
            return cell
        lines = (cell if isinstance(cell, Text) else Text(str(cell))).wrap(self.app.console, width)
        for line in lines:
            line.rstrip()
        return Text("\n").join(lines)


def _word_width(cell: Any) -> int:
    """The cells a cell's longest word takes: the narrowest its words wrap to."""
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((cell_len(word) for word in text.split()), default=0)


def _cell_width(cell: Any) -> int:
    """The cells a table's cell takes on one line (its longest line)."""
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((cell_len(line) for line in text.splitlines()), default=0)
