"""Explain: who refuses the form's configuration and why, under every implementation and heuristic
mode; the versions that matter; the nearest configurations that work (tui.engine.explain, asked
in the engine process). Enter on a nearest configuration loads it into the form.

A grid cell is a map, not the reason: it names who refused and the refusal's number, and the
refusals are listed in full below it, each once. The engine's explain module (and the graph code
it loads) is imported when the first explanation is drawn, not before the first paint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ...model.config import SdpaConfig
from ...present.explain import cell_text, numbered, refusal_lines
from ..messages import NearestChosen
from .fitted import FittedStatic, FittedTable

if TYPE_CHECKING:
    from ...engine.explain import Explanation, Nearest, Requirement

# the verdict of the configuration as given (explain's SUPPORTED, REFUSED, VALID)
VERDICT_STYLE = {"supported": "bold green", "refused": "bold red", "valid": "bold yellow"}
VERDICT_WORDS = {"valid": "valid as far as validate() can tell"}
# the row of the versions a requirement is read against, by its kind
REQUIREMENT_ROW = {"cuDNN": "cuDNN backend", "architecture": "GPU"}
MET = {True: ("met", "green"), False: ("NOT met", "bold red"), None: ("cannot be told here", "yellow")}
ENTER_WORDS = "Enter loads the highlighted configuration into the form (the rest of the form stays as it is)"


def needs_text(requirements: list[Requirement]) -> Text:
    """What refusals name as needed, each with whether this machine has it."""
    out = Text()
    for i, req in enumerate(requirements):
        words, style = MET[req.met]
        out.append(", " if i else "").append(f"{req.needed} ").append(words, style=style)
    return out


def versions_table(e: Explanation) -> Table:
    """What is installed, a row each; beside it what a refusal names as needed of it (a newer
    cuDNN, another architecture) and whether that is met; the GPU note under it."""
    needs: dict[str, list[Requirement]] = {}
    for req in e.requirements:
        needs.setdefault(REQUIREMENT_ROW.get(req.kind, req.kind), []).append(req)
    table = Table(title="Versions that matter", title_justify="left", title_style="bold", box=None)
    table.add_column("")
    table.add_column("installed", overflow="fold")
    if needs:
        table.add_column("a refusal needs")
    installed = dict(e.versions)
    for what in dict.fromkeys([*installed, *needs]):
        table.add_row(what, installed.get(what, "-"), *([needs_text(needs.get(what, []))] if needs else []))
    if e.gpu_note:
        table.caption, table.caption_justify, table.caption_style = e.gpu_note, "left", "yellow"
    return table


def nearest_words(e: Explanation) -> str:
    """What stands in place of the nearest configurations when there are none to list."""
    from ...engine.explain import SUPPORTED, VALID

    if e.verdict == SUPPORTED:
        return "the configuration as given is supported: nothing to search"
    if e.verdict == VALID:
        return "cuDNN's validate() accepts it as given; a GPU would tell whether cuDNN plans it"
    if not e.nearest:
        return f"none found among {e.searched} edits (one or two fields changed)"
    return f"{e.searched} edits judged, the smallest first. {ENTER_WORDS}"


class NearestTable(FittedTable):
    """The nearest working configurations, a row each, keyed by their place in the explanation;
    the highlighted one's run command is written in full under it, to copy."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.nearest: tuple[Nearest, ...] = ()
        self.add_columns("#", "edit", "checked")

    def show_nearest(self, nearest: tuple[Nearest, ...]) -> None:
        self.nearest = nearest
        self.clear()
        for i, n in enumerate(nearest):
            edit = ", ".join(f"{name} {was} → {now}" for name, was, now in n.changes)
            checked = f"{len(n.plan_names)} plans" if n.checked == "plans" else "validate()"
            self.add_row(str(i + 1), edit, checked, key=str(i))


GRID_PAD = 2  # a grid column's cell padding, both sides
GRID_LABEL = {False: "implementation", True: "impl."}  # the first column's name, in words and short


def grid_width(e: Explanation, short: bool) -> int:
    """The cells the grid takes across: each column as wide as its name or its widest cell."""
    numbers = numbered(e)
    impls = e.implementations
    label = max([cell_len(GRID_LABEL[short]), *(cell_len(i) for i in impls)])
    modes = (
        max([cell_len(mode), *(cell_text(e.cell(i, mode), numbers, short).cell_len for i in impls)])
        for mode in e.modes
    )
    return sum(width + GRID_PAD for width in (label, *modes))


class ExplainPane(VerticalScroll, can_focus=False):
    """Shows one explanation; the app says when it asks for another and what it waits for. Not
    focusable itself: F6 lands on the nearest configurations, one Enter from the form."""

    explanation: Explanation | None = None
    grid_short = False  # the grid drawn with numbers alone

    def compose(self) -> ComposeResult:
        yield FittedStatic(
            "Explain shows who refuses the form's configuration once it is asked.", id="explain-head"
        )
        cells = FittedTable(id="explain-cells", cursor_type="none", zebra_stripes=True)
        cells.can_focus = False  # a map to read: F6 goes on to the nearest configurations
        yield cells
        yield FittedStatic("", id="explain-refusals")
        yield FittedStatic("", id="explain-versions")
        yield FittedStatic("Nearest working configurations", id="explain-nearest-head")
        yield NearestTable(id="explain-nearest")
        yield FittedStatic("", id="explain-nearest-words")

    def on_mount(self) -> None:
        for widget in self.query("#explain-cells, #explain-nearest, #explain-nearest-head"):
            widget.display = False

    # ---- what the app says --------------------------------------------------------------------
    def say(self, words: str, config: SdpaConfig | None = None) -> None:
        """The head line: what is asked or awaited; an explanation below of another configuration
        is named, so that it is never taken for the form's."""
        text = Text(words)
        shown = self.explanation
        if shown is not None and shown.config != config:
            text.append(f"\nbelow: the explanation of {shown.config.label()}", style="dim")
        self.query_one("#explain-head", Static).update(text)

    def show(self, e: Explanation) -> None:
        self.explanation = e
        head = Text(f"{e.config.label()}: ")
        head.append(VERDICT_WORDS.get(e.verdict, e.verdict), style=VERDICT_STYLE.get(e.verdict, ""))
        head.append(f"   (asked in {e.seconds:.2f} s)", style="dim")
        self.query_one("#explain-head", Static).update(head)
        self._draw_grid(e, self._short(e))
        self.query_one("#explain-refusals", Static).update(refusal_lines(e))
        self.query_one("#explain-versions", Static).update(versions_table(e))
        table = self.query_one(NearestTable)
        table.display = bool(e.nearest)
        table.show_nearest(e.nearest)
        self.query_one("#explain-nearest-head").display = True
        self.query_one("#explain-nearest-words", Static).update(nearest_words(e))

    def _short(self, e: Explanation) -> bool:
        """Whether the grid in words runs past the pane (80 columns): its counts and numbers alone,
        every mode's name whole. The room kept for the pane's scrollbar is left out: the grid is
        drawn before the pane knows whether it scrolls."""
        room = (self.size.width or self.app.size.width) - self.styles.scrollbar_size_vertical
        return grid_width(e, short=False) > room

    def _draw_grid(self, e: Explanation, short: bool) -> None:
        cells = self.query_one("#explain-cells", DataTable)
        cells.display = True  # before it is filled: a hidden table's new height is not laid out
        cells.clear(columns=True)
        cells.add_columns(GRID_LABEL[short], *e.modes)
        numbers = numbered(e)
        for impl in e.implementations:
            cells.add_row(impl, *(cell_text(e.cell(impl, mode), numbers, short) for mode in e.modes))
        self.grid_short = short

    def on_resize(self) -> None:
        """A new width that needs the grid in the other words redraws the grid alone."""
        e = self.explanation
        if e is not None and self._short(e) != self.grid_short:
            self._draw_grid(e, not self.grid_short)

    # ---- the user's choice --------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The highlighted configuration's run command."""
        table = event.data_table
        if (
            isinstance(table, NearestTable)
            and self.explanation is not None
            and event.row_key.value is not None
        ):
            n = int(event.row_key.value)
            words = Text(nearest_words(self.explanation) + f"\n#{n + 1}: ")
            words.append(table.nearest[n].command, style="cyan")
            self.query_one("#explain-nearest-words", Static).update(words)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        table = event.data_table
        if not isinstance(table, NearestTable) or event.row_key.value is None or self.explanation is None:
            return
        event.stop()
        chosen = table.nearest[int(event.row_key.value)]
        self.post_message(NearestChosen(self.explanation.config, chosen.config))
