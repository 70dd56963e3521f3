"""Tables for the terminal that never cut a figure or a name, whatever the width.

A column says what it holds: figures (never wrapped, never shortened), names (wrapped at a space
only, never inside a word) or words (a description, a note: wrapped at spaces, and the first to
leave the table). At render time the table takes the first layout that fits the width: all its
columns in the usual box, then in a lighter one (no borders, one space between columns), then
with its words columns moved, in their declared order, to lines under the table; rows that say
the same thing there are said once, naming the rows (`notes (plan 0, 1, 2): ...`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

FIGURE, NAME, WORDS = "figure", "name", "words"
# The layouts tried in turn: (box, padding, show_edge); each costs its width beyond the cells
STANDARD, LIGHT, TIGHT = "standard", "light", "tight"
STYLES = (STANDARD, LIGHT, TIGHT)
WORDS_WIDTH = 20  # the narrowest a words column is kept at (narrower, it leaves the table)


def overhead(style: str, columns: int) -> int:
    """The width a layout adds to the cells of `columns` columns: borders and padding."""
    if style == STANDARD:
        return 3 * columns + 1  # a border each side of each column, one space of padding each side
    if style == LIGHT:
        return 2 * (columns - 1)  # a blank divider and one space of padding between columns
    return max(columns - 1, 0)  # a blank divider between columns


@dataclass
class Column:
    header: str
    kind: str = FIGURE
    justify: str = "right"
    drop: int | None = None  # the order in which it leaves the table for the lines under it
    style: str | None = None
    below: str | None = None  # what the lines under the table call it: its header if none


@dataclass
class Row:
    cells: list[Any]
    style: Any = None
    end_section: bool = False


@dataclass
class FitTable:
    """A rich table laid out at render time so that no figure and no name is ever cut."""

    title: Any = None
    caption: Any = None
    show_header: bool = True
    key: int = 0  # the column that names a row in the lines under the table
    key_words: str | None = None  # how those lines name the rows ("plan"): the key's header if none
    title_justify: str = "left"
    caption_justify: str = "center"
    columns: list[Column] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def add_column(
        self, header: str = "", kind: str = FIGURE, justify: str | None = None, drop: int | None = None,
        style: str | None = None, below: str | None = None,
    ) -> None:  # fmt: skip
        justify = justify or ("right" if kind == FIGURE else "left")
        self.columns.append(Column(header, kind, justify, drop, style, below))

    def add_columns(self, headers: list[str], kind: str = FIGURE, drop: int | None = None) -> None:
        """Columns of one kind; with `drop`, they leave the table in their order from that one."""
        for n, header in enumerate(headers):
            self.add_column(header, kind, drop=None if drop is None else drop + n)

    def add_row(self, *cells: Any, style: Any = None, end_section: bool = False) -> None:
        padded = list(cells) + [""] * (len(self.columns) - len(cells))
        self.rows.append(Row(padded, style, end_section))

    # -- measuring ---------------------------------------------------------------------------

    def _texts(self, console: Console) -> list[list[Text]]:
        def text(cell: Any) -> Text:
            if isinstance(cell, Text):
                return cell
            return console.render_str(str(cell), highlight=False) if cell is not None else Text()

        return [[text(c) for c in row.cells] for row in self.rows]

    def _limits(self, texts: list[list[Text]]) -> list[tuple[int, int]]:
        """Each column's (narrowest, widest) cell width: a figure's narrowest is its whole width,
        a name's or a note's its longest word; a header may wrap between its words."""
        limits = []
        for i, col in enumerate(self.columns):
            lines = [line for row in texts for line in row[i].plain.split("\n")]
            header = col.header.split() if self.show_header else []
            widest = max(
                [cell_len(line) for line in lines] + [cell_len(col.header) if self.show_header else 0]
            )
            words = [cell_len(w) for line in lines for w in line.split()]
            narrowest = max([cell_len(line) for line in lines] if col.kind == FIGURE else words, default=0)
            if col.kind == WORDS:  # a description kept in the table is given room enough to read
                narrowest = max(
                    narrowest, min(max((cell_len(line) for line in lines), default=0), WORDS_WIDTH)
                )
            narrowest = max([narrowest, *(cell_len(w) for w in header)])
            limits.append((max(narrowest, 1), max(widest, narrowest, 1)))
        return limits

    def _layout(self, limits: list[tuple[int, int]], width: int) -> tuple[list[int], str, bool]:
        """The columns kept and the style: the first layout that fits, names whole before names
        wrapped at their spaces; within each, all columns before fewer, the usual box before the
        lighter ones."""
        order = sorted((c.drop, i) for i, c in enumerate(self.columns) if c.drop is not None)
        kept = list(range(len(self.columns)))
        sets = [list(kept)]
        for _, i in order:
            kept = [k for k in kept if k != i]
            sets.append(list(kept))
        for whole_names in (True, False):
            for columns in sets:
                for style in STYLES:
                    least = sum(
                        limits[i][1] if whole_names and self.columns[i].kind == NAME else limits[i][0]
                        for i in columns
                    )
                    if least + overhead(style, len(columns)) <= width:
                        return columns, style, whole_names
        return sets[-1], TIGHT, False  # wider than the terminal even so: the terminal wraps its lines

    def _widths(
        self, limits: list[tuple[int, int]], columns: list[int], room: int, whole_names: bool
    ) -> list[int] | None:
        """Each kept column's width in `room`: none where every column fits whole; else each at its
        narrowest (a name whole where the layout keeps names whole), then the figures' headers
        widened whole, then the names, then the rest shared by what still wraps."""
        if sum(limits[i][1] for i in columns) <= room:
            return None
        widths = {i: limits[i][1 if whole_names and self.columns[i].kind == NAME else 0] for i in columns}
        spare = room - sum(widths.values())
        for kind in (FIGURE, NAME, WORDS):
            wanting = [i for i in columns if self.columns[i].kind == kind and limits[i][1] > widths[i]]
            while spare > 0 and wanting:
                share = max(spare // len(wanting), 1)
                for i in list(wanting):
                    more = min(share, limits[i][1] - widths[i], spare)
                    widths[i] += more
                    spare -= more
                    if widths[i] >= limits[i][1]:
                        wanting.remove(i)
        return [widths[i] for i in columns]

    # -- rendering ---------------------------------------------------------------------------

    def table(self, console: Console, width: int) -> tuple[Table, list[Text]]:
        """The rich table that fits `width`, and the lines under it for the columns it left out."""
        texts = self._texts(console)
        limits = self._limits(texts)
        columns, style, whole_names = self._layout(limits, width)
        widths = self._widths(limits, columns, max(width - overhead(style, len(columns)), 1), whole_names)
        looks: dict[str, Any] = {}
        if style != STANDARD:
            looks = dict(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
            looks["padding"] = (0, 1) if style == LIGHT else (0, 0)
        table = Table(title=self.title, title_justify=self.title_justify, caption=self.caption,  # type: ignore[arg-type]
                      caption_justify=self.caption_justify, show_header=self.show_header,  # type: ignore[arg-type]
                      **looks)  # fmt: skip
        for n, i in enumerate(columns):
            col = self.columns[i]
            table.add_column(
                col.header, justify=col.justify, style=col.style,  # type: ignore[arg-type]
                min_width=None if col.kind == WORDS else limits[i][0], width=None if widths is None else widths[n],
            )  # fmt: skip
        for row in self.rows:
            table.add_row(*(row.cells[i] for i in columns), style=row.style, end_section=row.end_section)
        return table, self._below(texts, columns)

    def _below(self, texts: list[list[Text]], columns: list[int]) -> list[Text]:
        """A line for each thing a left-out column says, naming the rows that say it."""
        lines = []
        key_words = self.key_words or self.columns[self.key].header
        for i, col in enumerate(self.columns):
            if i in columns:
                continue
            said: dict[str, tuple[Text, list[str]]] = {}
            for row in texts:
                value = row[i]
                if value.plain.strip() in ("", "-"):
                    continue
                said.setdefault(value.plain, (value, []))[1].append(row[self.key].plain or "-")
            for value, keys in said.values():
                line = Text(f"{col.below or col.header} ({key_words} {', '.join(keys)}): ", style="dim")
                lines.append(line.append_text(value))
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table, below = self.table(console, options.max_width)
        yield table
        yield from below

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        limits = self._limits(self._texts(console))
        kept = [i for i, c in enumerate(self.columns) if c.drop is None]
        narrowest = sum(limits[i][0] for i in kept) + overhead(TIGHT, len(kept))
        widest = sum(w for _, w in limits) + overhead(STANDARD, len(limits))
        return Measurement(narrowest, widest).clamp(max_width=options.max_width)
