"""Mask: which scores the configuration keeps (causal, window, padding, a score modifier's mask),
per batch entry, downsampled to the pane, drawn from the form's configuration so users see what
they asked for; under it, where K and V live: a paged cache's page table, or what packed tokens
save."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Select, Static

from ...model.config import SdpaConfig
from ...present.maskmap import mask_grid, modifier_words
from ...present.pagemap import MORE, packing_words, page_view
from .fitted import FittedStatic

SHADES = " ░▒▓█"
MIN_PAGE_ROWS = 2  # sequences of the page table shown however short the pane


class MaskPane(VerticalScroll):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.config: SdpaConfig | None = None
        self.seed = 0  # the inputs' seed of the form's runs: it deals a shuffled cache's pages

    def compose(self) -> ComposeResult:
        yield Select([("batch 0", 0)], value=0, allow_blank=False, id="mask-batch", compact=True)
        yield FittedStatic("", id="mask-map")
        yield FittedStatic("", id="mask-storage")

    def show(self, config: SdpaConfig, seed: int = 0) -> None:
        """The form's configuration (not a result's), with the inputs' seed."""
        self.config, self.seed = config, seed
        select = self.query_one("#mask-batch", Select)
        entries = config.b if config.padded else 1
        current = select.value if isinstance(select.value, int) and select.value < entries else 0
        select.set_options([(self._batch_label(config, i), i) for i in range(entries)])
        select.value = current
        select.display = config.padded
        self._draw()

    @staticmethod
    def _batch_label(config: SdpaConfig, i: int) -> str:
        lq, lkv = config.lengths(i)
        return f"batch {i}: s_q {lq}, s_kv {lkv}"

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self.config is None:
            return
        c = self.config
        batch = self.query_one("#mask-batch", Select).value
        batch = batch if isinstance(batch, int) else 0
        width = max(8, min(self.size.width - 8, 160))
        room = self.size.height - 5
        storage = None
        if c.paged or c.packed:  # the storage may take what half the pane leaves of the mask's rows
            storage = self._storage(c, batch, room - min(c.s_q, max(4, room // 2)))
            room -= len(storage.wrap(self.app.console, max(16, self.size.width - 2)))
        grid = mask_grid(c, batch, max(4, min(room, 60)), width)
        t = Text()
        t.append(
            f"rows: queries 0..{c.s_q - 1}   columns: keys 0..{c.s_kv - 1}   "
            f"kept {c.kept_pairs(batch):,} of {c.s_q * c.s_kv:,} scores per head\n",
            style="dim",
        )
        for row in grid:
            t.append("│")
            t.append("".join(SHADES[min(4, round(f * 4))] for f in row), style="cyan")
            t.append("│\n")
        t.append("█ kept  ░▒▓ partly kept (a cell covers many scores)  blank: masked", style="dim")
        if words := modifier_words(c):
            t.append("\n" + words, style="dim")
        self.query_one("#mask-map", Static).update(t)
        view = self.query_one("#mask-storage", Static)
        view.display = storage is not None
        view.update(storage or "")

    def _storage(self, c: SdpaConfig, batch: int, lines: int) -> Text:
        """Where K and V live: what packed tokens save, and a paged cache's page table with as
        many sequences as `lines` leaves room for (the selected batch entry's highlighted, always
        among them)."""
        width = max(16, self.size.width - 2)
        rows, drawn = MIN_PAGE_ROWS, 0
        while True:
            t = self._storage_text(c, batch, width, rows)
            height = len(t.wrap(self.app.console, width))
            if not c.paged or height <= drawn or height >= lines or rows >= c.b:
                return t  # filled, or more rows asked for drew no more lines
            rows, drawn = rows + lines - height, height

    def _storage_text(self, c: SdpaConfig, batch: int, width: int, rows: int) -> Text:
        t = Text()
        if c.packed:
            t.append(packing_words(c) + "\n")
        if c.paged:
            view = page_view(c, self.seed, width, rows, batch)
            t.append("page table: ", style="bold").append(view.summary + "\n")
            t.append(view.heading + "\n", style="dim")
            for i, line in view.rows:
                t.append(line + "\n", style="reverse" if i == batch and c.b > 1 else "")
            if view.left_out:
                t.append(f"{MORE} {view.left_out} more sequences\n", style="dim")
            t.append(view.legend, style="dim")
        t.rstrip()
        return t
