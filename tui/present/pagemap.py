"""Where a configuration's K and V live, as lines a pane can draw: the page table of a paged KV
cache (which pool page holds each block of each sequence) and what packed (THD) tokens save.

The table is storage.page_table itself, the one the run's graph reads for the same seed, so what
the Mask pane shows is what cuDNN was given. Pure arithmetic: the dashboard draws it at once,
without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.storage import packing_saves, page_table, pages_needed
from ..model.config import SdpaConfig, format_bytes

NOT_HELD = "·"  # a slot past the sequence's real pages: the table repeats its last page, never read
MORE = "…"  # more slots than the width shows
MAX_DEALT = 1 << 20  # pages a shuffled pool may hold for its table to be dealt here (a keystroke's worth)


@dataclass(frozen=True)
class PageTableView:
    """The page table cut to a pane: a line of figures, a heading of slots, a line per sequence
    shown (the sequence, its cells), how many sequences were left out, and what a cell means."""

    summary: str
    heading: str
    rows: tuple[tuple[int, str], ...]
    left_out: int
    legend: str


def cache_words(config: SdpaConfig, seed: int) -> str:
    """Page size, pages per sequence, pages and bytes held against a dense cache, the order."""
    held, dense = sum(pages_needed(config)), config.b * config.pages_per_sequence()
    dense_bytes = config.replace(page_size=None, layout="BSHD").kv_bytes_read()
    order = f"shuffled (seed {seed})" if config.page_order == "shuffled" else "ordered"
    return (
        f"pages of {config.page_size} tokens, {config.pages_per_sequence()} a sequence, {order}; "
        f"{held:,} pages held against {dense:,} in a dense cache ({held / dense:.0%}), K and V "
        f"{format_bytes(config.kv_bytes_read())} against {format_bytes(dense_bytes)}"
    )


def packing_words(config: SdpaConfig) -> str:
    """What packing the real tokens saves against padding every sequence to s_q and s_kv."""
    packed, padded = packing_saves(config)
    saved = 1 - packed / padded if padded else 0.0
    return (
        f"packed: {format_bytes(packed)} of q, k, v, o against {format_bytes(padded)} padded "
        f"({saved:.0%} saved)"
    )


def shown_sequences(b: int, selected: int, rows: int) -> list[int]:
    """The sequences that fit in `rows` lines (one kept for the count of the rest when some are
    left out): the first ones, the selected one always among them."""
    if b <= rows:
        return list(range(b))
    shown = list(range(max(1, rows - 1)))
    if selected not in shown and 0 <= selected < b:
        shown[-1] = selected
    return shown


def page_view(config: SdpaConfig, seed: int, width: int, rows: int, selected: int = 0) -> PageTableView:
    """The page table in `width` columns and at most `rows` lines of sequences: each cell the
    pool page of one block of page_size tokens, NOT_HELD past the sequence's real pages, MORE
    where the width ends. A pool past MAX_DEALT pages is described, not dealt."""
    needed = pages_needed(config)
    legend = f"each cell: the pool page of a block of {config.page_size} tokens"
    if sum(needed) > MAX_DEALT:
        words = f"the table is not drawn here: {sum(needed):,} pages are more than {MAX_DEALT:,}"
        return PageTableView(cache_words(config, seed), words, (), 0, "")
    table = page_table(config, seed)
    cell = max(len(str(sum(needed) - 1)), len(str(len(table[0]) - 1))) + 1
    label = len(f"seq {config.b - 1}") + 1
    slots = len(table[0])
    fits = max(1, (width - label - 2) // cell)
    cut = slots > fits
    shown_slots = range(fits if cut else slots)

    def line(cells: list[str]) -> str:
        return "".join(c.rjust(cell) for c in cells) + (f" {MORE}" if cut else "")

    heading = "slot".ljust(label) + line([str(j) for j in shown_slots])
    lines = tuple(
        (
            i,
            f"seq {i}".ljust(label)
            + line([str(table[i][j]) if j < needed[i] else NOT_HELD for j in shown_slots]),
        )
        for i in shown_sequences(config.b, selected, rows)
    )
    if min(needed) < slots:
        legend += f"; {NOT_HELD} past the sequence's real length (never read)"
    return PageTableView(cache_words(config, seed), heading, lines, config.b - len(lines), legend)
