"""Random configurations: the one generator the GPU soak benchmark and the CPU fuzz tests share.

Both want configurations spread over what a GPU engineer would try (GQA and MQA, decode and
cross-attention lengths, odd head dims, FP8, every layout, mask and training option) that make
sense (`validate()` finds nothing) and are small: a run well under a second on an
H200, an fp32 reference that fits in memory. With one generator the soak and the tests explore
the same surface. Choices come from each field's declaration (fields.FIELDS), so a choice added
there is drawn here without an edit; the shape, which the declarations bound only loosely, is
drawn within `max_elements`. The same rng state gives the same configurations.
"""

from __future__ import annotations

import math
import random
from typing import Any, NamedTuple

from .config import FP8_DTYPES, SdpaConfig
from .fields import FIELD, FIELDS, Choice, Field, Modes, Plan, Switch
from .inputs import hazard_recipes
from .validation import validate

MAX_ELEMENTS = 1 << 27  # the scores b*h_q*s_q*s_kv and each b*h*s*d tensor: 512 MiB in fp32
MAX_ATTEMPTS = 100  # draws before random_config gives up
FEATURE_SHARE = 0.2  # how often an optional feature (window, padding, bias, ALiBi, ...) is on
RECIPE_SHARE = 0.1  # how often the inputs follow a hazard recipe (NaN padding, large scores, ...)
MAX_BATCH, MAX_HEADS, MAX_SEQ = 64, 64, 1 << 14  # before the element budget trims them
HEAD_DIM_STEP, COMMON_HEAD_DIMS, MAX_HEAD_DIM, RARE_HEAD_DIM = 8, (64, 128), 256, 512


class NoConfigFound(RuntimeError):
    """Every draw was refused by validate(): the bounds asked for admit no sensible config."""


class Shares(NamedTuple):  # how often the draws take the heavier paths
    fp8: float
    backward: float


Values = dict[str, Any]  # field name -> value, as SdpaConfig takes them


# ---- the shape: sizes within the element budget ------------------------------------------
def _limit(name: str, cap: int) -> int:  # `cap`, or the field's own maximum where that is lower
    return min(cap, FIELD[name].meta.get("max", cap))


def _up_to(rng: random.Random, hi: int) -> int:
    """1..hi, each octave as likely as the next; half the time a power of two."""
    if hi <= 1:
        return 1
    x = min(hi, int(2 ** rng.uniform(0, math.log2(hi + 1))))
    return 1 << (x.bit_length() - 1) if rng.random() < 0.5 else x


def _head_dim(rng: random.Random, cap: int) -> int:
    """A multiple of 8: often 64 or 128, any up to 256, now and then 512."""
    cap = _limit("d_qk", cap)
    if rng.random() < 0.03 and cap >= RARE_HEAD_DIM:
        return RARE_HEAD_DIM
    common = [d for d in COMMON_HEAD_DIMS if d <= cap]
    if common and rng.random() < 0.5:
        return rng.choice(common)
    return HEAD_DIM_STEP * rng.randint(1, min(MAX_HEAD_DIM, cap) // HEAD_DIM_STEP)


# (s_q, s_kv) as attention meets them, from two drawn lengths a and b; and how often
SEQUENCE_REGIMES = {
    "self-attention": (0.4, lambda a, b: (a, a)),
    "decode": (0.15, lambda a, b: (1, a)),
    "a chunk of a longer context": (0.2, lambda a, b: (min(a, b), max(a, b))),
    "cross-attention": (0.2, lambda a, b: (a, b)),
    "one key": (0.05, lambda a, b: (a, 1)),
}
HEAD_SHARING = {  # (h_q, h_kv) from h_q: multi-head, multi-query, grouped (h_kv a divisor of h_q)
    "MHA": (0.5, lambda rng, h: h),
    "MQA": (0.2, lambda rng, h: 1),
    "GQA": (0.3, lambda rng, h: rng.choice([g for g in range(1, h + 1) if h % g == 0])),
}


def _pick(rng: random.Random, table: dict[str, tuple[float, Any]]) -> Any:
    return rng.choices([f for _, f in table.values()], weights=[w for w, _ in table.values()])[0]


def _sequence_lengths(rng: random.Random, cap: int, max_elements: int) -> tuple[int, int]:
    """(s_q, s_kv) of a regime, halved together (their order kept) until the scores fit."""
    s_q, s_kv = _pick(rng, SEQUENCE_REGIMES)(_up_to(rng, cap), _up_to(rng, cap))
    while s_q * s_kv > max_elements:
        s_q, s_kv = -(-s_q // 2), -(-s_kv // 2)
    return s_q, s_kv


def _shape(rng: random.Random, max_elements: int) -> Values:
    """b, heads, lengths and head dims with b*h_q*s_q*s_kv and every b*h*s*d within the budget."""
    d_qk = _head_dim(rng, max_elements)
    d_v = d_qk if rng.random() < 0.75 else _head_dim(rng, max_elements)
    seq_cap = _limit("s_q", min(MAX_SEQ, max_elements // max(d_qk, d_v)))
    s_q, s_kv = _sequence_lengths(rng, seq_cap, max_elements)
    per_head = max(s_q * s_kv, max(s_q, s_kv) * max(d_qk, d_v))
    h_q = _up_to(rng, _limit("h_q", min(MAX_HEADS, max_elements // per_head)))
    h_kv = _pick(rng, HEAD_SHARING)(rng, h_q)
    b = _up_to(rng, _limit("b", min(MAX_BATCH, max_elements // (per_head * h_q))))
    return dict(b=b, h_q=h_q, h_kv=h_kv, s_q=s_q, s_kv=s_kv, d_qk=d_qk, d_v=d_v)


# ---- the rest: each field as its declaration allows, the rules across fields kept ---------
def _precision(rng: random.Random, v: Values, shares: Shares) -> Values:
    """FP8 inputs at the share asked, only they choosing O's dtype; now and then a scale of our own."""
    dtypes, out = FIELD["dtype"].choices, FIELD["out_dtype"]
    fp8 = rng.random() < shares.fp8
    dtype = rng.choice([d for d in dtypes if (d in FP8_DTYPES) == fp8] or dtypes)
    scale = round(rng.uniform(0.25, 2) / math.sqrt(v["d_qk"]), 4) if rng.random() < FEATURE_SHARE else None
    outs = [c for c in out.choices if fp8 or c in (out.default, dtype)]
    return dict(dtype=dtype, out_dtype=rng.choice(outs), attn_scale=scale)


def _training(rng: random.Random, v: Values, shares: Shares) -> Values:
    """The backward at the share asked (deterministic half the time), dropout now and then."""
    backward = rng.random() < shares.backward
    dropout = round(rng.uniform(0.05, 0.5), 2) if rng.random() < FEATURE_SHARE else 0.0
    deterministic, seed = backward and rng.random() < 0.5, rng.randrange(1 << 16) if dropout else 0
    return dict(backward=backward, deterministic=deterministic, dropout=dropout, dropout_seed=seed)


def _masks(rng: random.Random, v: Values, shares: Shares) -> Values:
    """A sliding window, a padding mask (real lengths per batch entry, a side sometimes full) and
    an additive bias, each now and then."""

    def lengths(s: int) -> tuple[int, ...]:
        return tuple(rng.randint(1, s) for _ in range(v["b"])) if rng.random() < 0.8 else (s,) * v["b"]

    padded, biased = rng.random() < FEATURE_SHARE, rng.random() < FEATURE_SHARE
    bias = FIELD["bias"]
    drawn = dict(
        window=_up_to(rng, v["s_kv"]) if rng.random() < FEATURE_SHARE else None,
        seq_lens_q=lengths(v["s_q"]) if padded else None,
        seq_lens_kv=lengths(v["s_kv"]) if padded else None,
        bias=rng.choice([c for c in bias.choices if c != bias.default]) if biased else bias.default,
    )
    if rng.random() < FEATURE_SHARE:  # a score modifier, alone as cuDNN takes it
        drawn.update(variant=_variant(rng, v), causal="none", window=None, seq_lens_q=None, seq_lens_kv=None,
                     alibi=False, layout=rng.choice([x for x in FIELD["layout"].choices if x != "THD"]))  # fmt: skip
    return drawn


def _variant(rng: random.Random, v: Values) -> str:
    """One of the variants, its parameters within the shape (documents where s_q = s_kv)."""
    cap = round(rng.uniform(2, 60), 1)
    names = ["softcap", "softcap-causal", "prefix-lm"] + (["document"] if v["s_q"] == v["s_kv"] > 1 else [])
    name = rng.choice(names)
    if name == "softcap":
        return f"softcap:{cap:g}"
    if name == "softcap-causal":
        return f"softcap-causal:{cap:g}" + (f",{_up_to(rng, v['s_kv'])}" if rng.random() < 0.5 else "")
    if name == "prefix-lm":
        return f"prefix-lm:{_up_to(rng, v['s_kv'])}"
    cuts = sorted(rng.sample(range(1, v["s_q"]), min(rng.randint(1, 4), v["s_q"] - 1)))
    return "document:" + ",".join(str(b - a) for a, b in zip([0, *cuts], [*cuts, v["s_q"]], strict=True))


def _inference(rng: random.Random, v: Values, shares: Shares) -> Values:
    """A paged KV cache (pages of a power of two, either order), the softmax's row outputs and
    sink tokens, each now and then."""
    paged, rows = rng.random() < FEATURE_SHARE, rng.random() < FEATURE_SHARE
    return dict(
        page_size=2 ** rng.randint(3, 7) if paged else None,
        page_order=rng.choice(FIELD["page_order"].choices),
        softmax_out=rng.choice(FIELD["softmax_out"].choices[1:]) if rows else "none",
        sink=rng.random() < FEATURE_SHARE,
    )


PIN_ENGINES = (0, 1, 2, 8)  # engine ids SDPA plans carry on Hopper; a pin is drawn with default knobs
DRAWERS = (_precision, _training, _masks, _inference)  # each (rng, the values so far, Shares) -> more values


def _by_kind(rng: random.Random, f: Field) -> Any:
    """A field no drawer names: any of its choices, a switch now and then; others keep the default."""
    if isinstance(f, Choice):
        return rng.choice(f.choices)
    if isinstance(f, Switch):
        return rng.random() < FEATURE_SHARE
    if isinstance(f, Modes) and rng.random() < 0.5:
        return tuple(c for c in f.choices if rng.random() < 0.5) or (rng.choice(f.choices),)
    if (
        isinstance(f, Plan) and rng.random() < FEATURE_SHARE / 4
    ):  # an engine's default knobs: built or declined
        return str(rng.choice(PIN_ENGINES))
    return f.default


# ---- the generator ---------------------------------------------------------------------
def draw_config(
    rng: random.Random,
    *,
    max_elements: int = MAX_ELEMENTS,
    fp8_share: float = 0.2,
    backward_share: float = 0.3,
) -> SdpaConfig:
    """One draw, not yet validated: random_config keeps the draws validate() accepts."""
    if max_elements < HEAD_DIM_STEP:
        raise ValueError(f"max_elements must be at least {HEAD_DIM_STEP}, one head dim (got {max_elements})")
    shares = Shares(fp8_share, backward_share)
    values = _shape(rng, max_elements)
    for drawer in DRAWERS:
        values.update(drawer(rng, values, shares))
    for f in FIELDS:
        if f.name not in values:
            values[f.name] = _by_kind(rng, f)
    config = SdpaConfig(**values)
    return config.replace(inputs=_recipe(config))


def _recipe(config: SdpaConfig) -> str:
    """Now and then one of the hazard recipes worth drawing for `config` (inputs.hazard_recipes),
    drawn from the configuration itself, not from `rng`: every other field's draws stay as they were."""
    own = random.Random(repr(config))
    if own.random() >= RECIPE_SHARE:
        return FIELD["inputs"].default
    return own.choice(hazard_recipes(own, config))


def random_config(
    rng: random.Random,
    *,
    max_elements: int = MAX_ELEMENTS,
    fp8_share: float = 0.2,
    backward_share: float = 0.3,
    gpu_memory_bytes: int | None = None,
    attempts: int = MAX_ATTEMPTS,
) -> SdpaConfig:
    """A configuration validate() accepts (against `gpu_memory_bytes` when given), drawn again
    where it refuses one; NoConfigFound after `attempts` refusals."""
    ask = dict(max_elements=max_elements, fp8_share=fp8_share, backward_share=backward_share)
    errors: list = []
    for _ in range(attempts):
        config = draw_config(rng, **ask)
        if not (errors := validate(config, gpu_memory_bytes)):
            return config
    refused = "; ".join(e.message for e in errors)
    raise NoConfigFound(f"no valid configuration in {attempts} draws; the last was refused: {refused}")


def random_configs(seed: int, n: int, **kw: Any) -> list[SdpaConfig]:
    """`n` configurations from `seed`: the same seed, the same list."""
    rng = random.Random(seed)
    return [random_config(rng, **kw) for _ in range(n)]
