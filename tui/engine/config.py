"""The attention configuration a user asks about, and what is wrong with it.

`SdpaConfig` is the one record that travels from the form (or the CLI, or a preset)
to the engine. It is frozen and hashable so it can key the graph cache, and it
round-trips through a plain dict so presets (TOML) and results (JSON) carry it as is.
Validation here is about what the user typed making sense; whether cuDNN supports a
sensible configuration is cuDNN's to say, in its own words, at build time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from .layouts import LAYOUTS

DTYPES = ("fp16", "bf16", "fp8_e4m3")
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp8_e4m3": 1}
FP8_DTYPES = ("fp8_e4m3",)
OUT_DTYPES = ("auto", "fp16", "bf16", "fp8_e4m3")  # auto: the inputs' dtype
CAUSAL_MODES = ("none", "top_left", "bottom_right")
HEURISTIC_MODES = ("A", "B", "FALLBACK")
BIAS_SHAPES = ("none", "1x1", "bx1", "1xh", "bxh")  # additive bias of shape (1|b, 1|h, s_q, s_kv)
IMPLEMENTATIONS = ("auto", "composite", "unified")  # cuDNN's attention_implementation

# Per-field upper bounds: beyond them a number is a typo, not a shape (they are far
# above anything the GPU could hold, so they never refuse a real model).
_INT_LIMITS = {
    "b": 1 << 16,
    "h_q": 1 << 12,
    "h_kv": 1 << 12,
    "s_q": 1 << 22,
    "s_kv": 1 << 22,
    "d_qk": 1 << 12,
    "d_v": 1 << 12,
}

FIELD_LABELS = {
    "b": "batch (b)",
    "h_q": "query heads (h_q)",
    "h_kv": "key/value heads (h_kv)",
    "s_q": "query length (s_q)",
    "s_kv": "key/value length (s_kv)",
    "d_qk": "q/k head dim (d_qk)",
    "d_v": "v head dim (d_v)",
    "dtype": "dtype",
    "layout": "layout",
    "causal": "causal mask",
    "attn_scale": "attention scale",
    "heuristics": "heuristic modes",
    "window": "sliding window",
    "seq_lens_q": "query lengths",
    "seq_lens_kv": "key/value lengths",
    "alibi": "ALiBi",
    "bias": "bias",
    "implementation": "implementation",
    "dropout": "dropout probability",
    "dropout_seed": "dropout seed",
    "out_dtype": "output dtype",
    "backward": "backward pass",
    "deterministic": "deterministic backward",
}


@dataclass(frozen=True)
class FieldError:
    """One problem with one field, in words a user understands."""

    field: str
    message: str

    def __str__(self) -> str:
        return self.message


class ConfigError(ValueError):
    """A dict or option set that cannot become an SdpaConfig; carries every problem at once."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(e.message for e in errors))


@dataclass(frozen=True)
class SdpaConfig:
    """One SDPA problem: the forward, and with `backward` the training step's backward too.
    Logical dims are (b, h, s, d); `layout` is only strides."""

    b: int = 4
    h_q: int = 12
    h_kv: int = 12
    s_q: int = 1024
    s_kv: int = 1024
    d_qk: int = 64
    d_v: int = 64
    dtype: str = "fp16"
    layout: str = "BSHD"
    causal: str = "top_left"
    attn_scale: float | None = None  # None: 1/sqrt(d_qk)
    heuristics: tuple[str, ...] = field(default=("A", "FALLBACK"))
    window: int | None = None  # sliding window: query i sees keys j > i + alignment - window
    seq_lens_q: tuple[int, ...] | None = None  # per-batch real lengths (padding mask); None: all full
    seq_lens_kv: tuple[int, ...] | None = None
    alibi: bool = False
    bias: str = "none"
    implementation: str = "auto"
    dropout: float = 0.0  # probability of dropping a softmax weight (training); 0: off
    dropout_seed: int = 0  # Philox seed of the dropout mask
    out_dtype: str = "auto"  # O's dtype; auto: the inputs' (FP8 inputs may ask for fp16/bf16 O)
    backward: bool = False  # training: forward with softmax stats, then dQ, dK, dV
    deterministic: bool = False  # ask the backward for a deterministic algorithm

    # ---- derived -------------------------------------------------------------------
    @property
    def scale(self) -> float:
        return self.attn_scale if self.attn_scale is not None else 1.0 / math.sqrt(self.d_qk)

    @property
    def q_dims(self) -> tuple[int, int, int, int]:
        return (self.b, self.h_q, self.s_q, self.d_qk)

    @property
    def k_dims(self) -> tuple[int, int, int, int]:
        return (self.b, self.h_kv, self.s_kv, self.d_qk)

    @property
    def v_dims(self) -> tuple[int, int, int, int]:
        return (self.b, self.h_kv, self.s_kv, self.d_v)

    @property
    def o_dims(self) -> tuple[int, int, int, int]:
        return (self.b, self.h_q, self.s_q, self.d_v)

    @property
    def o_dtype(self) -> str:
        return self.dtype if self.out_dtype == "auto" else self.out_dtype

    @property
    def fp8(self) -> bool:
        return self.dtype in FP8_DTYPES

    @property
    def padded(self) -> bool:
        return self.seq_lens_q is not None or self.seq_lens_kv is not None

    def lengths(self, batch: int) -> tuple[int, int]:
        """(real query length, real key/value length) of one batch entry."""
        lq = self.seq_lens_q[batch] if self.seq_lens_q else self.s_q
        lkv = self.seq_lens_kv[batch] if self.seq_lens_kv else self.s_kv
        return lq, lkv

    def band(self, batch: int = 0) -> tuple[int | None, int | None]:
        """(lo, hi): query i keeps key j when i + lo < j <= i + hi (None: unbounded), within the
        batch entry's real lengths. Bottom-right alignment counts from the real lengths."""
        lq, lkv = self.lengths(batch)
        align = lkv - lq if self.causal == "bottom_right" else 0
        hi = align if self.causal != "none" else None
        lo = align - self.window if self.window else None
        return lo, hi

    @property
    def causal_offset(self) -> int | None:
        """Query i keeps keys j <= i + offset (batch 0); None when there is no causal bound."""
        return self.band(0)[1]

    def kept_pairs(self, batch: int | None = None) -> int:
        """Unmasked (query, key) score positions per head: of one batch entry, or summed over all."""
        if batch is None:
            if not self.padded:
                return self.b * self.kept_pairs(0)
            return sum(self.kept_pairs(i) for i in range(self.b))
        lq, lkv = self.lengths(batch)
        lo, hi = self.band(batch)
        upto = lq * lkv if hi is None else _kept_below_diagonal(lq, lkv, hi)
        below = 0 if lo is None else _kept_below_diagonal(lq, lkv, lo)
        return upto - below

    def flops(self) -> int:
        """Forward FLOPs: two matmuls over the kept scores of the real tokens only (softmax not counted)."""
        return 2 * self.h_q * self.kept_pairs() * (self.d_qk + self.d_v)

    def backward_flops(self) -> int:
        """Backward FLOPs, counted by the usual convention as 2.5x the forward's (five matmuls
        against two, one of them recomputing the scores)."""
        return int(2.5 * self.flops())

    def io_bytes(self) -> int:
        """Minimum DRAM traffic of the forward: read Q, K, V once and write O once."""
        qkv = self.b * self.h_q * self.s_q * self.d_qk + self.b * self.h_kv * self.s_kv * (
            self.d_qk + self.d_v
        )
        o = self.b * self.h_q * self.s_q * self.d_v
        return qkv * DTYPE_BYTES.get(self.dtype, 2) + o * DTYPE_BYTES.get(self.o_dtype, 2)

    def backward_io_bytes(self) -> int:
        """Minimum DRAM traffic of the backward: read Q, K, V, O, dO and the stats; write dQ, dK, dV."""
        size = DTYPE_BYTES.get(self.dtype, 2)
        qkv = self.b * self.h_q * self.s_q * self.d_qk + self.b * self.h_kv * self.s_kv * (
            self.d_qk + self.d_v
        )
        o = self.b * self.h_q * self.s_q * self.d_v
        return 2 * qkv * size + 2 * o * DTYPE_BYTES.get(self.o_dtype, 2) + self.b * self.h_q * self.s_q * 4

    def memory_estimate(self) -> int:
        """GPU bytes a checked run needs: the tensors, their fp32 reference copies,
        torch's own output for comparison and the reference's score chunk."""
        out_elems = self.b * self.h_q * self.s_q * self.d_v
        in_elems = self.b * self.h_q * self.s_q * self.d_qk + self.b * self.h_kv * self.s_kv * (
            self.d_qk + self.d_v
        )
        elems = in_elems + out_elems
        # low-precision tensors + fp32 copies of q/k/v/o + reference out (fp32) + torch out
        gqa = self.b * self.h_q * self.s_kv * (self.d_qk + self.d_v) * 4 if self.h_q != self.h_kv else 0
        scores = self.s_q * self.s_kv
        bias = 0
        if self.bias in BIAS_SHAPES and self.bias != "none":
            bias = (
                scores
                * (self.b if self.bias[0] == "b" else 1)
                * (self.h_q if self.bias[-1] == "h" else 1)
                * 2
            )
        # torch's own SDPA is given an explicit mask when the mask is more than plain causal
        torch_mask = (
            self.b * self.h_q * scores * 2 if (self.window or self.padded or self.alibi or bias) else 0
        )
        dump = (
            self.b * self.h_q * scores * 4 if self.dropout else 0
        )  # the dropout mask cuDNN dumps for the check
        need = (
            elems * 2
            + elems * 4
            + out_elems * (4 + 2)
            + gqa
            + bias
            + torch_mask
            + dump
            + REFERENCE_CHUNK_BYTES
        )
        if self.backward:
            # dO, dQ/dK/dV (cuDNN's, torch's and the fp32 reference's), the stats, and the
            # reference's autograd: one chunk's scores kept for its backward, plus GQA copies
            need += out_elems * (2 + 4) + elems * (2 + 2 + 4) + self.b * self.h_q * self.s_q * 4
            need += 3 * REFERENCE_CHUNK_BYTES + gqa
        return need

    # ---- validation -----------------------------------------------------------------
    def validate(self, gpu_memory_bytes: int | None = None) -> list[FieldError]:
        """Every problem at once, each naming its field; [] when the config is sensible."""
        errors: list[FieldError] = []
        for name, limit in _INT_LIMITS.items():
            value = getattr(self, name)
            label = FIELD_LABELS[name]
            if isinstance(value, bool) or not isinstance(value, int):
                errors.append(FieldError(name, f"{label} must be a whole number (got {value!r})"))
            elif value < 1:
                errors.append(FieldError(name, f"{label} must be at least 1 (got {value})"))
            elif value > limit:
                errors.append(FieldError(name, f"{label} must be at most {limit} (got {value})"))
        bad_fields = {e.field for e in errors}
        ints_ok = not errors
        if not {"h_q", "h_kv"} & bad_fields and self.h_q % self.h_kv:
            errors.append(
                FieldError("h_kv", f"h_q must be a multiple of h_kv (got {self.h_q} and {self.h_kv})")
            )
        if self.dtype not in DTYPES:
            errors.append(
                FieldError("dtype", f"dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r})")
            )
        if self.layout not in LAYOUTS:
            errors.append(
                FieldError("layout", f"layout must be one of {', '.join(LAYOUTS)} (got {self.layout!r})")
            )
        if self.causal not in CAUSAL_MODES:
            errors.append(
                FieldError(
                    "causal", f"causal mask must be one of {', '.join(CAUSAL_MODES)} (got {self.causal!r})"
                )
            )
        if self.attn_scale is not None and (
            isinstance(self.attn_scale, bool)
            or not isinstance(self.attn_scale, int | float)
            or not math.isfinite(self.attn_scale)
            or self.attn_scale <= 0
        ):
            errors.append(
                FieldError(
                    "attn_scale", f"attention scale must be a positive number (got {self.attn_scale!r})"
                )
            )
        heur = self.heuristics
        if not isinstance(heur, tuple) or not heur:
            errors.append(
                FieldError("heuristics", "heuristic modes must name at least one of A, B, FALLBACK")
            )
        else:
            bad = [m for m in heur if m not in HEURISTIC_MODES]
            if bad:
                errors.append(
                    FieldError("heuristics", f"unknown heuristic mode {bad[0]!r} (use A, B or FALLBACK)")
                )
            elif len(set(heur)) != len(heur):
                errors.append(FieldError("heuristics", "heuristic modes must not repeat"))
        if not {"s_q", "s_kv"} & bad_fields and self.causal == "bottom_right" and self.s_q > self.s_kv:
            errors.append(
                FieldError(
                    "causal",
                    f"bottom-right causal needs s_q <= s_kv (got {self.s_q} and {self.s_kv}): "
                    "the first queries would see no key",
                )
            )
        errors += self._validate_masks(bad_fields)
        if ints_ok and gpu_memory_bytes is not None and self.dtype in DTYPES:
            need = self.memory_estimate()
            if need > gpu_memory_bytes:
                errors.append(
                    FieldError(
                        "b",
                        f"this run needs about {format_bytes(need)} of GPU memory but the GPU has "
                        f"{format_bytes(gpu_memory_bytes)}; lower b, heads or sequence lengths",
                    )
                )
        return errors

    def _validate_masks(self, bad_fields: set[str]) -> list[FieldError]:
        errors: list[FieldError] = []
        lengths_ok = not {"b", "s_q", "s_kv"} & bad_fields
        if self.window is not None and (
            isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1
        ):
            errors.append(
                FieldError(
                    "window", f"sliding window must be a whole number of at least 1 (got {self.window!r})"
                )
            )
        elif self.window is not None and lengths_ok and not self.padded and self.s_q > self.s_kv:
            errors.append(
                FieldError(
                    "window",
                    f"a sliding window needs s_q <= s_kv unless lengths are padded (got {self.s_q} and {self.s_kv})",
                )
            )
        for name, limit in (("seq_lens_q", self.s_q), ("seq_lens_kv", self.s_kv)):
            lens = getattr(self, name)
            if lens is None or not lengths_ok:
                continue
            label = FIELD_LABELS[name]
            if not isinstance(lens, tuple) or any(
                isinstance(x, bool) or not isinstance(x, int) for x in lens
            ):
                errors.append(FieldError(name, f"{label} must be whole numbers (got {lens!r})"))
            elif len(lens) != self.b:
                errors.append(
                    FieldError(name, f"{label} need one length per batch entry: {self.b} (got {len(lens)})")
                )
            elif not all(1 <= x <= limit for x in lens):
                bad = next(x for x in lens if not 1 <= x <= limit)
                errors.append(FieldError(name, f"{label} must lie between 1 and {limit} (got {bad})"))
        if (self.seq_lens_q is None) != (self.seq_lens_kv is None):
            missing = "seq_lens_kv" if self.seq_lens_kv is None else "seq_lens_q"
            errors.append(
                FieldError(
                    missing, "padding needs both query and key/value lengths (use 'full' for one side)"
                )
            )
        if not isinstance(self.alibi, bool):
            errors.append(FieldError("alibi", f"ALiBi must be true or false (got {self.alibi!r})"))
        if self.bias not in BIAS_SHAPES:
            errors.append(
                FieldError("bias", f"bias must be one of {', '.join(BIAS_SHAPES)} (got {self.bias!r})")
            )
        if (
            isinstance(self.dropout, bool)
            or not isinstance(self.dropout, int | float)
            or not 0 <= self.dropout < 1
        ):
            errors.append(
                FieldError(
                    "dropout", f"dropout probability must be at least 0 and below 1 (got {self.dropout!r})"
                )
            )
        if (
            isinstance(self.dropout_seed, bool)
            or not isinstance(self.dropout_seed, int)
            or self.dropout_seed < 0
        ):
            errors.append(
                FieldError(
                    "dropout_seed", f"dropout seed must be a whole number >= 0 (got {self.dropout_seed!r})"
                )
            )
        if self.out_dtype not in OUT_DTYPES:
            errors.append(
                FieldError(
                    "out_dtype",
                    f"output dtype must be one of {', '.join(OUT_DTYPES)} (got {self.out_dtype!r})",
                )
            )
        elif self.dtype in DTYPES and not self.fp8 and self.o_dtype != self.dtype:
            errors.append(
                FieldError(
                    "out_dtype",
                    f"{self.dtype} inputs give {self.dtype} output; only FP8 inputs may choose (got {self.out_dtype})",
                )
            )
        for name in ("backward", "deterministic"):
            if not isinstance(getattr(self, name), bool):
                errors.append(
                    FieldError(
                        name, f"{FIELD_LABELS[name]} must be true or false (got {getattr(self, name)!r})"
                    )
                )
        if self.deterministic is True and self.backward is False:
            errors.append(
                FieldError(
                    "deterministic",
                    "the deterministic option is for the backward pass: turn the backward pass on",
                )
            )
        if self.implementation not in IMPLEMENTATIONS:
            errors.append(
                FieldError(
                    "implementation",
                    f"implementation must be one of {', '.join(IMPLEMENTATIONS)} (got {self.implementation!r})",
                )
            )
        return errors

    # ---- dict round trip ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["heuristics"] = list(self.heuristics)
        for key in ("attn_scale", "window", "seq_lens_q", "seq_lens_kv"):
            if d[key] is None:
                del d[key]  # TOML has no null; absent means the default
            elif isinstance(d[key], tuple):
                d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: SdpaConfig | None = None) -> SdpaConfig:
        """Build from a plain dict; unknown keys and wrong types are errors that name the key.

        Keys missing from `data` come from `base` (the defaults when None). Values are
        type-checked here; whether they make sense is `validate()`'s job.
        """
        base = base or cls()
        known = {f.name for f in dataclasses.fields(cls)}
        errors = [
            FieldError(key, f"unknown key {key!r} (known keys: {', '.join(sorted(known))})")
            for key in data
            if key not in known
        ]
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue
            try:
                values[key] = _coerce(key, value)
            except (TypeError, ValueError) as exc:
                errors.append(FieldError(key, str(exc)))
        if errors:
            raise ConfigError(errors)
        return dataclasses.replace(base, **values)

    def replace(self, **changes: Any) -> SdpaConfig:
        return dataclasses.replace(self, **changes)

    def label(self) -> str:
        """A short one-line description for tables and logs."""
        heads = f"{self.h_q}" if self.h_q == self.h_kv else f"{self.h_q}/{self.h_kv}"
        seq = f"{self.s_q}" if self.s_q == self.s_kv else f"{self.s_q}x{self.s_kv}"
        dim = f"{self.d_qk}" if self.d_qk == self.d_v else f"{self.d_qk}/{self.d_v}"
        causal = {"none": "", "top_left": " causal", "bottom_right": " causal-br"}.get(self.causal, "")
        extras = ""
        if self.window:
            extras += f" win{self.window}"
        if self.padded:
            extras += " varlen"
        if self.alibi:
            extras += " alibi"
        if self.bias != "none":
            extras += f" bias{self.bias}"
        if self.implementation != "auto":
            extras += f" {self.implementation}"
        if self.dropout:
            extras += f" drop{self.dropout:g}"
        if self.out_dtype != "auto" and self.o_dtype != self.dtype:
            extras += f" out-{self.o_dtype}"
        if self.backward:
            extras += " +bwd" + ("-det" if self.deterministic else "")
        return f"b{self.b} h{heads} s{seq} d{dim} {self.dtype} {self.layout}{causal}{extras}"


REFERENCE_CHUNK_BYTES = 256 << 20  # fp32 scores the reference holds at once


def with_lengths(
    config: SdpaConfig, seq_lens_q: tuple[int, ...] | None, seq_lens_kv: tuple[int, ...] | None
) -> SdpaConfig:
    """Set the real lengths; when only one side is given the other side is full."""
    if (seq_lens_q is None) != (seq_lens_kv is None):
        seq_lens_q = seq_lens_q or (config.s_q,) * config.b
        seq_lens_kv = seq_lens_kv or (config.s_kv,) * config.b
    return config.replace(seq_lens_q=seq_lens_q, seq_lens_kv=seq_lens_kv)


def format_lengths(lens: tuple[int, ...] | None) -> str:
    return "full" if lens is None else ",".join(str(x) for x in lens)


def parse_lengths(text: str, b: int, s: int, seed: int = 0) -> tuple[int, ...] | None:
    """Per-batch real lengths from what a user types: 'full' (no padding: None), 'random'
    (uniform in [1, s], seeded), 'ratio 0.5' (every entry that share of s), or a list
    '512, 384, 1024'. Raises ValueError with a message for the field."""
    import random

    text = text.strip().lower()
    if text in ("", "full", "none"):
        return None
    if text.startswith("random"):
        rng = random.Random(seed)
        return tuple(rng.randint(1, s) for _ in range(b))
    if text.startswith("ratio"):
        try:
            ratio = float(text.removeprefix("ratio").strip(" :="))
        except ValueError:
            raise ValueError(f"write the ratio as 'ratio 0.5' (got {text!r})") from None
        if not 0 < ratio <= 1:
            raise ValueError(f"the ratio must be in (0, 1] (got {ratio})")
        return tuple(max(1, round(s * ratio)) for _ in range(b))
    try:
        return tuple(int(x) for x in text.replace(";", ",").replace(" ", ",").split(",") if x)
    except ValueError:
        raise ValueError(
            f"lengths are 'full', 'random', 'ratio 0.5' or a list like '512,384' (got {text!r})"
        ) from None


def _kept_below_diagonal(s_q: int, s_kv: int, off: int) -> int:
    """sum over i in [0, s_q) of clamp(i + 1 + off, 0, s_kv), in O(1)."""
    # rows where i + 1 + off <= 0 keep nothing; rows where i + 1 + off >= s_kv keep all
    first_partial = max(0, -off)  # smallest i with i + 1 + off >= 1
    first_full = max(0, s_kv - 1 - off)  # smallest i with i + 1 + off >= s_kv
    lo, hi = min(first_partial, s_q), min(first_full, s_q)
    partial = 0
    if hi > lo:  # arithmetic series of (i + 1 + off) for i in [lo, hi)
        partial = (hi - lo) * ((lo + 1 + off) + (hi + off)) // 2
    full = (s_q - max(hi, lo)) * s_kv
    return partial + full


def _coerce(key: str, value: Any) -> Any:
    """Type-check one dict value; text from TOML/JSON/CLI arrives already typed."""
    if key in _INT_LIMITS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key} must be a whole number (got {value!r})")
        return value
    if key == "attn_scale":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"attn_scale must be a number (got {value!r})")
        return float(value)
    if key == "heuristics":
        if isinstance(value, str):
            value = [v for v in value.replace("+", ",").split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"heuristics must be a list of mode names (got {value!r})")
        return tuple(v.strip().upper() for v in value)
    if key == "window":
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise TypeError(f"window must be a whole number (got {value!r})")
    if key in ("seq_lens_q", "seq_lens_kv"):
        if value is None:
            return None
        if not isinstance(value, list | tuple) or any(
            isinstance(x, bool) or not isinstance(x, int) for x in value
        ):
            raise TypeError(f"{key} must be a list of whole numbers (got {value!r})")
        return tuple(value)
    if key == "dropout":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"dropout must be a number (got {value!r})")
        return float(value)
    if key == "dropout_seed":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"dropout_seed must be a whole number (got {value!r})")
        return value
    if key in ("alibi", "backward", "deterministic"):
        if not isinstance(value, bool):
            raise TypeError(f"{key} must be true or false (got {value!r})")
        return value
    if key in ("dtype", "layout", "causal", "bias", "implementation", "out_dtype"):
        if not isinstance(value, str):
            raise TypeError(f"{key} must be text (got {value!r})")
        value = value.strip()
        if key == "layout":
            return value.upper()
        if key == "causal":
            return value.lower().replace("-", "_")
        if key == "bias":
            return value.lower().replace(",", "x").replace("*", "x")
        value = value.lower()
        return "fp8_e4m3" if value in ("fp8", "e4m3") else value
    return value


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
