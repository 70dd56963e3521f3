"""Real (unpadded) lengths per batch entry: what a person types for them, and their text.

Lengths are made one per batch entry, so `b` and the sequence length are checked before any
are made: a typo such as b=10**9 must not allocate a billion lengths.
"""

from __future__ import annotations

from .config import MAX_BATCH, MAX_LENGTH, SdpaConfig


def with_lengths(
    config: SdpaConfig, seq_lens_q: tuple[int, ...] | None, seq_lens_kv: tuple[int, ...] | None
) -> SdpaConfig:
    """Set the real lengths; when only one side is given the other side is full (when b is
    within its bound: no per-batch data is made for a batch that validation will refuse)."""
    if (seq_lens_q is None) != (seq_lens_kv is None) and _within(config.b, MAX_BATCH):
        seq_lens_q = seq_lens_q or (config.s_q,) * config.b
        seq_lens_kv = seq_lens_kv or (config.s_kv,) * config.b
    return config.replace(seq_lens_q=seq_lens_q, seq_lens_kv=seq_lens_kv)


def _within(n: object, most: int) -> bool:
    """A whole number from 1 to `most`: a count it is safe to make that many of."""
    return isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= most


def format_lengths(lens: tuple[int, ...] | None) -> str:
    return "full" if lens is None else ",".join(str(x) for x in lens)


def parse_lengths(text: str, b: int, s: int, seed: int = 0) -> tuple[int, ...] | None:
    """Per-batch real lengths from what a user types: 'full' (no padding: None), 'random'
    (uniform in [1, s], seeded), 'ratio 0.5' (every entry that share of s), or a list
    '512, 384, 1024'. ValueError says what to write instead. `b` and `s` must be within their
    bounds: the lengths are made one per batch entry before anything else checks them."""
    import random

    text = text.strip().lower()
    if text in ("", "full", "none"):
        return None
    if not (_within(b, MAX_BATCH) and _within(s, MAX_LENGTH)):
        raise ValueError("lengths are read against the batch size and the sequence length: fix those first")
    if text.startswith("random"):
        rng = random.Random(seed)
        return tuple(rng.randint(1, s) for _ in range(b))
    if text.startswith("ratio"):
        try:
            ratio = float(text.removeprefix("ratio").strip(" :="))
        except ValueError:
            raise ValueError(f"write a ratio as 'ratio 0.5' (got {text!r})") from None
        if not 0 < ratio <= 1:
            raise ValueError(f"a ratio must be in (0, 1] (got {ratio})")
        return tuple(max(1, round(s * ratio)) for _ in range(b))
    try:
        return tuple(int(x) for x in text.replace(";", ",").replace(" ", ",").split(",") if x)
    except ValueError:
        raise ValueError(
            f"write 'full', 'random', 'ratio 0.5' or a list like 512,384 (got {text!r})"
        ) from None
