"""What the hunt runs: configurations of the fuzz tests' generator (model/sampling.py), small
enough to run in well under a second, with the hazards that have hidden cuDNN's wrong answers
laid over them now and then: one query with grouped heads (decode), lengths 64 mod 128 under a
mask, head counts at their limits, and the input recipes of model/inputs.py (NaN in the padded
and unused parts, very large or very negative scores, near-equal scores, padded strides). A
focus (`--focus paged,backward`) turns those features on in every draw. The same seed draws the
same configurations.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ..model.config import SdpaConfig
from ..model.fields import FIELD
from ..model.sampling import NoConfigFound, draw_config
from .hunt_shrink import fit, valid

HUNT_ELEMENTS = 1 << 22  # the scores and each tensor of a draw: a run in well under a second
HAZARD_SHARE = 0.5  # how often a draw gets one of the hazards below
RECIPE_SHARE = 0.6  # how often a draw gets an input recipe of its own
MAX_DRAWS = 200
MAX_LIMIT_HEADS = 128  # a head count at its limit, as served models go (and the scores allow)


def _decode_gqa(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    """One query, grouped heads: the ragged stats and backward bugs of s_q = 1 with GQA."""
    h_q = 2 ** rng.randint(1, 6)
    h_kv = rng.choice([g for g in range(1, h_q) if h_q % g == 0])
    rows = rng.choice(("none", "stats")) if c.variant == "none" else c.softmax_out
    return c.replace(s_q=1, h_q=h_q, h_kv=h_kv, seq_lens_q=None, seq_lens_kv=None, softmax_out=rows)


def _mod_128(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    """Lengths 64 mod 128 under a mask: the tile edge where NaN dQ showed with a mask."""
    s = 128 * rng.randint(0, 7) + 64
    mask = rng.choice(("causal", "window", "padding"))
    c = c.replace(s_q=s, s_kv=s, variant="none", causal="top_left" if mask != "padding" else c.causal)
    if mask == "window":
        return c.replace(window=rng.randint(1, s))
    if mask == "padding":
        lens = tuple(rng.randint(1, s) for _ in range(c.b))
        return c.replace(seq_lens_q=lens, seq_lens_kv=lens)
    return c


def _head_limits(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    """Head counts at their limits: one of each, many queries on one key/value head, or fewer
    than 8 key/value heads under many query heads."""
    h_q, h_kv = rng.choice(((1, 1), (MAX_LIMIT_HEADS, 1), (64, 4), (56, 7), (2, 1)))
    return c.replace(h_q=h_q, h_kv=h_kv, b=1)


HAZARDS: tuple[Callable[[random.Random, SdpaConfig], SdpaConfig], ...] = (_decode_gqa, _mod_128, _head_limits)


def _packed(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    lens_q = tuple(rng.randint(1, c.s_q) for _ in range(c.b))
    lens_kv = lens_q if c.s_q == c.s_kv else tuple(rng.randint(1, c.s_kv) for _ in range(c.b))
    return c.replace(layout="THD", variant="none", seq_lens_q=lens_q, seq_lens_kv=lens_kv)


def _gqa(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    h_q = max(c.h_q, 2)
    return c.replace(h_q=h_q, h_kv=rng.choice([g for g in range(1, h_q) if h_q % g == 0]))


def _masked(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    if c.causal == "none" and not c.window and not c.varlen:
        return c.replace(variant="none", causal=rng.choice(("top_left", "bottom_right")))
    return c


# each focus: what it turns on, in words (the CLI's help) and as a change of the draw
FOCUS: dict[str, tuple[str, Callable[[random.Random, SdpaConfig], SdpaConfig]]] = {
    "paged": ("a paged KV cache", lambda rng, c: c.replace(page_size=2 ** rng.randint(3, 6), variant="none")),
    "thd": ("packed THD tokens", _packed),
    "backward": ("the backward pass", lambda rng, c: c.replace(backward=True)),
    "fp8": ("FP8 inputs", lambda rng, c: c.replace(dtype="fp8_e4m3")),
    "decode": ("one query (s_q = 1)", lambda rng, c: c.replace(s_q=1, seq_lens_q=None, seq_lens_kv=None)),
    "gqa": ("grouped heads (h_kv below h_q)", _gqa),
    "masks": ("a causal mask, a window or padding", _masked),
}


def parse_focus(text: str | None) -> tuple[str, ...]:
    """'paged,thd' -> ('paged', 'thd'); ValueError names the words it does not know."""
    words = tuple(dict.fromkeys(w.strip().lower() for w in (text or "").split(",") if w.strip()))
    unknown = [w for w in words if w not in FOCUS]
    if unknown:
        raise ValueError(f"unknown focus {', '.join(unknown)}: the focuses are {', '.join(FOCUS)}")
    return words


def _recipe(rng: random.Random, c: SdpaConfig) -> SdpaConfig:
    """An input recipe worth drawing for the configuration (model/inputs.py), now and then."""
    if "inputs" not in FIELD or rng.random() >= RECIPE_SHARE:
        return c
    from ..model.inputs import hazard_recipes

    return c.replace(inputs=rng.choice(hazard_recipes(rng, c)))


def hazard_config(
    rng: random.Random, focus: tuple[str, ...] = (), max_elements: int = HUNT_ELEMENTS
) -> SdpaConfig:
    """One configuration for the hunt: a draw of the generator, maybe a hazard, the focus, a
    recipe; redrawn until validate() accepts it (NoConfigFound after MAX_DRAWS)."""
    shares = dict(
        fp8_share=1.0 if "fp8" in focus else 0.15, backward_share=1.0 if "backward" in focus else 0.4
    )
    for _ in range(MAX_DRAWS):
        c = draw_config(rng, max_elements=max_elements, **shares)
        if rng.random() < HAZARD_SHARE:
            c = rng.choice(HAZARDS)(rng, c)
        for word in focus:
            c = FOCUS[word][1](rng, c)
        c = fit(c)
        if c.s_q * c.s_kv * c.b * c.h_q > 4 * max_elements:
            continue  # a hazard's heads or lengths over what a quick run holds
        c = fit(_recipe(rng, c))
        if valid(c):
            return c
    raise NoConfigFound(
        f"no valid configuration in {MAX_DRAWS} draws with focus {', '.join(focus) or 'none'}"
    )
