"""Which scores a configuration keeps, downsampled to a grid a terminal can draw.

Pure arithmetic on the mask's definition (SdpaConfig.band and the real lengths, or the score
modifier's mask: Variant.span), so the dashboard draws it instantly without torch.
"""

from __future__ import annotations

from ..model.config import SdpaConfig

SAMPLES_PER_CELL = 8


def kept_in_row(config: SdpaConfig, batch: int, i: int, c0: int, c1: int) -> int:
    """How many keys in [c0, c1) query i keeps."""
    lq, lkv = config.lengths(batch)
    if i >= lq:
        return 0
    if config.variant != "none":  # its mask alone: cuDNN takes a score_mod beside no other
        first, stop = config.modifier.span(i, lkv)
        return max(0, min(stop, c1) - max(first, c0))
    lo, hi = config.band(batch)
    first = 0 if lo is None else max(0, i + lo + 1)
    last = lkv - 1 if hi is None else min(lkv - 1, i + hi)
    return max(0, min(last, c1 - 1) - max(first, c0) + 1)


def modifier_words(config: SdpaConfig) -> str:
    """The score modifier under the picture: what it does, and where its mask comes from."""
    if config.variant == "none":
        return ""
    v = config.modifier
    where = "its mask is written inside cuDNN's score_mod" if v.masks else "it masks nothing"
    return f"score modifier {v.text}: {v.words()}; {where}"


def mask_grid(config: SdpaConfig, batch: int, rows: int, cols: int) -> list[list[float]]:
    """rows x cols cells, each the fraction of its (query, key) block that is kept."""
    rows, cols = max(1, min(rows, config.s_q)), max(1, min(cols, config.s_kv))
    grid = []
    for r in range(rows):
        r0, r1 = r * config.s_q // rows, max((r + 1) * config.s_q // rows, r * config.s_q // rows + 1)
        step = max(1, (r1 - r0) // SAMPLES_PER_CELL)
        sample = list(range(r0, r1, step))[:SAMPLES_PER_CELL]
        line = []
        for c in range(cols):
            c0, c1 = c * config.s_kv // cols, max((c + 1) * config.s_kv // cols, c * config.s_kv // cols + 1)
            kept = sum(kept_in_row(config, batch, i, c0, c1) for i in sample)
            line.append(kept / (len(sample) * (c1 - c0)))
        grid.append(line)
    return grid
