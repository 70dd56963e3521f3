"""Mask: which scores the configuration keeps (causal, window, padding), per batch entry,
downsampled to the pane, drawn from the form's configuration so users see what they asked for."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Select, Static

from ...engine.config import SdpaConfig
from ...engine.maskmap import mask_grid

SHADES = " ░▒▓█"


class MaskPane(Vertical):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.config: SdpaConfig | None = None

    def compose(self) -> ComposeResult:
        yield Select([("batch 0", 0)], value=0, allow_blank=False, id="mask-batch", compact=True)
        yield Static("", id="mask-map")

    def show_config(self, config: SdpaConfig) -> None:
        self.config = config
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
        height = max(4, min(self.size.height - 5, 60))
        grid = mask_grid(c, batch, height, width)
        t = Text()
        lq, lkv = c.lengths(batch)
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
        self.query_one("#mask-map", Static).update(t)
