"""The attention configuration a user asks about.

`SdpaConfig` is the one record that travels from the form (or the CLI, or a preset) to the engine. It is
frozen and hashable so it can key the graph cache, and it round-trips through a plain dict so presets
(TOML) and results (JSON) carry it as is.

Every field is declared once, here: its default, and in its metadata how a person names it, enters it and
reads it back. `fields.py` derives from that declaration the parsers, the messages of each field, the CLI
options, the form's widgets and the option table of docs/CLI.md; `validation.py` holds the rules that
involve several fields. Whether cuDNN supports a sensible configuration is cuDNN's to say, at build time.

The class body uses only the standard library and this module's constants, so it can be copied as is
into a standalone script.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .layouts import LAYOUTS

if TYPE_CHECKING:
    from .variants import Variant

DTYPES = ("fp16", "bf16", "fp8_e4m3")
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp8_e4m3": 1}
FP8_DTYPES = ("fp8_e4m3",)
OUT_DTYPES = ("auto", "fp16", "bf16", "fp8_e4m3")  # auto: the inputs' dtype
CAUSAL_MODES = ("none", "top_left", "bottom_right")
HEURISTIC_MODES = ("A", "B", "FALLBACK", "OPENSOURCE")  # OPENSOURCE: the frontend's own engines
PAGE_ORDERS = ("shuffled", "ordered")  # a serving allocator's random pages, or each sequence's in a row
SOFTMAX_OUTPUTS = ("none", "stats", "max_sum_exp")  # what the forward also writes per query row
BIAS_SHAPES = ("none", "1x1", "bx1", "1xh", "bxh")  # additive bias of shape (1|b, 1|h, s_q, s_kv)
IMPLEMENTATIONS = ("auto", "composite", "unified")  # cuDNN's attention_implementation
REFERENCE_CHUNK_BYTES = 256 << 20  # fp32 scores the reference holds at once
BACKWARD_FLOPS_RULE = "2.5x the forward's, five matmuls against two"  # how backward_flops() counts

# The shape's numbers. Their upper bounds are far above anything a GPU could hold: beyond them a number
# is a typo, not a shape. Lengths are expanded per batch entry, so the batch's bound bounds their cost.
MAX_BATCH, MAX_LENGTH = 1 << 16, 1 << 22
SEED_MAX = (1 << 63) - 1  # a seed is an int64, as torch's generators and cuDNN's Philox take it
_SHAPE = {"kind": "int", "min": 1, "required": True, "group": "shape"}
_HEADS = {**_SHAPE, "max": 1 << 12, "shorthand": "h"}  # --h sets both
_LENGTH = {**_SHAPE, "max": MAX_LENGTH, "shorthand": "s"}
_HEAD_DIM = {**_SHAPE, "max": 1 << 12, "shorthand": "d"}
_FP8_ALIASES = {"fp8": "fp8_e4m3", "e4m3": "fp8_e4m3"}


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
    Logical dims are (b, h, s, d); `layout` is only strides. Each field's metadata declares it
    (the keys are described in fields.py)."""

    # fmt: off
    b: int = field(default=4, metadata={**_SHAPE, "max": MAX_BATCH, "label": "batch (b)", "form_label": "batch", "help": "batch size"})
    h_q: int = field(default=12, metadata={**_HEADS, "label": "query heads (h_q)", "form_label": "q heads", "help": "query heads"})
    h_kv: int = field(default=12, metadata={**_HEADS, "label": "key/value heads (h_kv)", "form_label": "kv heads",
                                            "help": "key/value heads; a divisor of h_q below it is GQA (1: MQA)"})
    s_q: int = field(default=1024, metadata={**_LENGTH, "label": "query length (s_q)", "form_label": "q length",
                                             "help": "query sequence length"})
    s_kv: int = field(default=1024, metadata={**_LENGTH, "label": "key/value length (s_kv)", "form_label": "kv length",
                                              "help": "key/value sequence length"})
    d_qk: int = field(default=64, metadata={**_HEAD_DIM, "label": "q/k head dim (d_qk)", "form_label": "qk head dim", "help": "head dim of q and k"})
    d_v: int = field(default=64, metadata={**_HEAD_DIM, "label": "v head dim (d_v)", "form_label": "v head dim", "help": "head dim of v"})
    dtype: str = field(
        default="fp16",
        metadata={"kind": "choice", "choices": DTYPES, "aliases": _FP8_ALIASES, "group": "precision",
                  "label": "dtype", "help": "dtype of q, k and v; fp8_e4m3 is FP8 attention"},
    )
    layout: str = field(
        default="BSHD",
        metadata={"kind": "choice", "choices": LAYOUTS, "group": "precision", "label": "layout",
                  "help": "memory order of the logical (b, h, s, d) tensors: only their strides"},
    )
    causal: str = field(
        default="top_left",
        metadata={"kind": "choice", "choices": CAUSAL_MODES, "group": "masks", "label": "causal mask",
                  "form_label": "causal",
                  "choice_labels": {"top_left": "top-left", "bottom_right": "bottom-right"},
                  "help": "causal mask, its diagonal aligned to the top-left or the bottom-right corner",
                  "tag": {"top_left": " causal", "bottom_right": " causal-br"}},
    )
    attn_scale: float | None = field(
        default=None,
        metadata={"kind": "float", "above": 0, "none": "1/√d_qk", "flag": "scale", "group": "masks",
                  "label": "attention scale", "form_label": "scale",
                  "help": "factor of the scores q·k before the softmax"},
    )
    heuristics: tuple[str, ...] = field(
        default=("A", "FALLBACK"),
        metadata={"kind": "modes", "choices": HEURISTIC_MODES, "group": "timing", "label": "heuristic modes",
                  "form_id": "heur", "help": "cuDNN heuristic modes whose plans are listed"},
    )
    plan: str | None = field(
        default=None,
        metadata={"kind": "plan", "none": "the pick", "group": "timing", "label": "pinned plan", "form_label": "plan",
                  "help": "run the forward with this plan, its engine id and knobs as `1 KERNEL_CFG=27` (what "
                          "`search` finds); the run says whether it still exists and how it compares",
                  "tag": " plan[{}]"},
    )
    window: int | None = field(  # query i sees keys j > i + alignment - window
        default=None,
        metadata={"kind": "int", "min": 1, "max": MAX_LENGTH, "none": "none", "group": "masks",
                  "label": "sliding window",
                  "form_label": "window", "help": "sliding window: each query sees this many keys back",
                  "tag": " win{}"},
    )
    seq_lens_q: tuple[int, ...] | None = field(  # real lengths (padding mask); None: all full
        default=None,
        metadata={"kind": "lengths", "size": "s_q", "group": "masks", "label": "query lengths",
                  "form_label": "q lengths",
                  "help": "real query length of each batch entry; given one side, the other is full",
                  "tag": " varlen"},
    )
    seq_lens_kv: tuple[int, ...] | None = field(
        default=None,
        metadata={"kind": "lengths", "size": "s_kv", "group": "masks", "label": "key/value lengths",
                  "form_label": "kv lengths",
                  "help": "real key/value length of each batch entry", "tag": " varlen"},
    )
    alibi: bool = field(
        default=False,
        metadata={"kind": "flag", "group": "masks", "label": "ALiBi", "form_label": "ALiBi position biases",
                  "help": "add ALiBi position biases to the scores", "tag": " alibi"},
    )
    variant: str = field(default="none", metadata={  # docs/VARIANTS.md
        "kind": "variant", "group": "masks", "label": "variant", "tag": " {}",
        "help": "a score modifier built as cuDNN's score_mod sub-graph; cuDNN takes it with causal none, no window, "
                "no padding, no ALiBi"})
    bias: str = field(
        default="none",
        metadata={"kind": "choice", "choices": BIAS_SHAPES, "group": "masks", "label": "bias",
                  "help": "additive bias of shape (1|b) x (1|h) x s_q x s_kv, random values", "tag": " bias{}"},
    )
    implementation: str = field(
        default="auto",
        metadata={"kind": "choice", "choices": IMPLEMENTATIONS, "group": "timing", "label": "implementation",
                  "form_label": "impl",
                  "help": "cuDNN's attention implementation; where cuDNN lacks one, its reason is the message",
                  "tag": " {}"},
    )
    page_size: int | None = field(
        default=None,
        metadata={"kind": "int", "min": 1, "max": MAX_LENGTH, "none": "none", "group": "inference",
                  "label": "page size",
                  "help": "paged KV cache: K and V live in pools of pages of this many tokens, found through "
                          "a page table per sequence (as vLLM and SGLang serve)", "tag": " paged{}"},
    )
    page_order: str = field(
        default="shuffled",
        metadata={"kind": "choice", "choices": PAGE_ORDERS, "group": "inference", "label": "page order",
                  "help": "where a sequence's pages lie in the pool: shuffled as a serving allocator leaves "
                          "them, or ordered", "tag": " {}", "tag_needs": "page_size"},
    )
    sink: bool = field(
        default=False,
        metadata={"kind": "flag", "group": "inference", "label": "sink tokens", "form_label": "sink token per head",
                  "help": "a learned logit per query head that joins every softmax row (gpt-oss)", "tag": " sink"},
    )
    softmax_out: str = field(
        default="none",
        metadata={"kind": "choice", "choices": SOFTMAX_OUTPUTS, "group": "inference", "label": "softmax outputs", "form_label": "softmax out",
                  "choice_labels": {"max_sum_exp": "max, sum exp"},
                  "help": "what the forward also writes per query row: the log-sum-exp stats, or the row's "
                          "max score and its sum of exponents (cuDNN 9.20 and later)", "tag": " +{}"},
    )
    dropout: float = field(
        default=0.0,
        metadata={"kind": "float", "min": 0, "below": 1, "group": "precision", "label": "dropout probability",
                  "form_label": "dropout",
                  "help": "probability of dropping a softmax weight (checked against the mask cuDNN drew)",
                  "tag": " drop{:g}"},
    )
    dropout_seed: int = field(
        default=0,
        metadata={"kind": "int", "min": 0, "max": SEED_MAX, "group": "precision", "label": "dropout seed",
                  "help": "Philox seed of the dropout mask"},
    )
    out_dtype: str = field(
        default="auto",
        metadata={"kind": "choice", "choices": OUT_DTYPES, "aliases": _FP8_ALIASES, "group": "precision",
                  "label": "output dtype", "form_label": "out dtype",
                  "help": "O's dtype; auto is the inputs'. Only FP8 inputs may choose another",
                  "tag": " out-{}", "tag_unless": "dtype"},
    )
    backward: bool = field(
        default=False,
        metadata={"kind": "flag", "group": "precision", "label": "backward pass", "form_label": "backward: dQ, dK, dV",
                  "help": "the training step: the forward writes its softmax stats, then dQ, dK, dV",
                  "tag": " +bwd"},
    )
    deterministic: bool = field(
        default=False,
        metadata={"kind": "flag", "group": "precision", "label": "deterministic backward",
                  "help": "ask the backward for a deterministic algorithm (checked: two runs, identical bits)",
                  "tag": "-det", "tag_needs": "backward"},
    )
    inputs: str = field(default="normal", metadata={  # model/inputs.py
        "kind": "inputs", "group": "precision", "label": "input recipe", "form_label": "inputs", "tag": " inputs[{}]",
        "help": "the inputs' seed, magnitudes, the fill of padded and unused parts, strides: normal, or items such "
                "as seed:7,scale:100,shift:-1000,near-equal,pad:nan,strides:padded"})
    # fmt: on

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
        """Whether cuDNN is given real lengths (a padding mask): typed ones, or full ones that a
        paged cache and packed tokens need."""
        return self.seq_lens_q is not None or self.seq_lens_kv is not None or self.paged or self.packed

    @property
    def varlen(self) -> bool:
        """Whether some batch entry is shorter than its side: the padding mask then masks keys and
        rows (a paged cache or packed tokens at full lengths mask nothing)."""
        return self.padded and any(self.lengths(i) != (self.s_q, self.s_kv) for i in range(self.b))

    @property
    def modifier(self) -> Variant:
        """The score modifier `variant` names (variants.py); ValueError where its text is not one."""
        from .variants import parse_variant

        return parse_variant(self.variant)

    @property
    def paged(self) -> bool:
        return self.page_size is not None

    @property
    def packed(self) -> bool:
        """THD: every sequence's real tokens packed one after another, found by ragged offsets."""
        return self.layout == "THD"

    def pages_per_sequence(self) -> int:
        return -(-self.s_kv // self.page_size) if self.page_size else 0

    def pages_needed(self) -> list[int]:
        """Pages each sequence of a paged cache holds: enough for its real key/value length."""
        return [-(-self.lengths(i)[1] // (self.page_size or 1)) for i in range(self.b)]

    def real_tokens(self, side: int) -> int:
        """Real tokens of the query side (0) or the key/value side (1), summed over the batch."""
        return sum(self.lengths(i)[side] for i in range(self.b))

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
        if self.variant != "none":  # its mask alone: cuDNN refuses a score_mod beside any other
            return self.modifier.kept_pairs(lq, lkv)
        lo, hi = self.band(batch)
        upto = lq * lkv if hi is None else self._kept_below_diagonal(lq, lkv, hi)
        below = 0 if lo is None else self._kept_below_diagonal(lq, lkv, lo)
        return upto - below

    def flops(self) -> int:
        """Forward FLOPs: two matmuls over the kept scores of the real tokens only (softmax not counted)."""
        return 2 * self.h_q * self.kept_pairs() * (self.d_qk + self.d_v)

    def backward_flops(self) -> int:
        """Backward FLOPs, counted by the usual convention as 2.5x the forward's (five matmuls
        against two, one of them recomputing the scores)."""
        return int(2.5 * self.flops())

    def _tokens(self) -> tuple[int, int]:
        """(query, key/value) tokens the tensors hold: packed, the real ones only; else every position."""
        if self.packed:
            return self.real_tokens(0), self.real_tokens(1)
        return self.b * self.s_q, self.b * self.s_kv

    def kv_bytes_read(self) -> int:
        """Bytes of K and V a forward reads: a paged cache's whole pages and its tables, or the tokens held."""
        per_token = self.h_kv * (self.d_qk + self.d_v) * DTYPE_BYTES.get(self.dtype, 2)
        if not self.paged:
            return self._tokens()[1] * per_token
        tables = 2 * self.b * self.pages_per_sequence() * 4  # int32 page tables, one for K, one for V
        return sum(self.pages_needed()) * (self.page_size or 1) * per_token + tables

    def io_bytes(self) -> int:
        """Minimum DRAM traffic of the forward: read Q, K, V once and write O once (as stored)."""
        q_tokens = self._tokens()[0] * self.h_q
        size, out = DTYPE_BYTES.get(self.dtype, 2), DTYPE_BYTES.get(self.o_dtype, 2)
        return q_tokens * (self.d_qk * size + self.d_v * out) + self.kv_bytes_read()

    def backward_io_bytes(self) -> int:
        """Minimum DRAM traffic of the backward: read Q, K, V, O, dO and the stats; write dQ, dK, dV."""
        size = DTYPE_BYTES.get(self.dtype, 2)
        q_tokens, kv_tokens = self._tokens()
        qkv = q_tokens * self.h_q * self.d_qk + kv_tokens * self.h_kv * (self.d_qk + self.d_v)
        o = q_tokens * self.h_q * self.d_v
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
        bias = 0 if self.bias not in BIAS_SHAPES[1:] else scores * 2 * (self.b if self.bias[0] == "b" else 1)
        bias *= self.h_q if self.bias[-1] == "h" else 1
        # torch's own SDPA is given an explicit mask when the mask is more than plain causal
        masked = self.window or self.padded or self.alibi or bias or self.variant != "none"
        torch_mask = self.b * self.h_q * scores * 2 if masked else 0
        dump = self.b * self.h_q * scores * 4 if self.dropout else 0  # the dropout mask cuDNN dumps
        extras = gqa + bias + torch_mask + dump + REFERENCE_CHUNK_BYTES
        need = elems * 2 + elems * 4 + out_elems * (4 + 2) + extras
        if self.backward:
            # dO, dQ/dK/dV (cuDNN's, torch's and the fp32 reference's), the stats, and the
            # reference's autograd: one chunk's scores kept for its backward, plus GQA copies
            need += out_elems * (2 + 4) + elems * (2 + 2 + 4) + self.b * self.h_q * self.s_q * 4
            need += 3 * REFERENCE_CHUNK_BYTES + gqa
        return need

    @staticmethod
    def _kept_below_diagonal(s_q: int, s_kv: int, off: int) -> int:
        """sum over i in [0, s_q) of clamp(i + 1 + off, 0, s_kv), in O(1)."""
        # rows where i + 1 + off <= 0 keep nothing; rows where i + 1 + off >= s_kv keep all
        first_partial = max(0, -off)  # smallest i with i + 1 + off >= 1
        first_full = max(0, s_kv - 1 - off)  # smallest i with i + 1 + off >= s_kv
        lo, hi = min(first_partial, s_q), min(first_full, s_q)
        # an arithmetic series of (i + 1 + off) for i in [lo, hi), then the full rows
        partial = (hi - lo) * ((lo + 1 + off) + (hi + off)) // 2 if hi > lo else 0
        return partial + (s_q - max(hi, lo)) * s_kv

    # ---- the dict form (fields.config_from_dict reads it back, validation.validate checks it) --
    def to_dict(self) -> dict[str, Any]:
        """Plain values for TOML and JSON: tuples as lists, and None left out (TOML has no null;
        an absent key means the default)."""
        d = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                d[f.name] = list(value) if isinstance(value, tuple) else value
        return d

    def replace(self, **changes: Any) -> SdpaConfig:
        return dataclasses.replace(self, **changes)

    def label(self) -> str:
        """A short one-line description for tables and logs: the shape, then each field's tag."""
        heads = f"{self.h_q}" if self.h_q == self.h_kv else f"{self.h_q}/{self.h_kv}"
        seq = f"{self.s_q}" if self.s_q == self.s_kv else f"{self.s_q}x{self.s_kv}"
        dim = f"{self.d_qk}" if self.d_qk == self.d_v else f"{self.d_qk}/{self.d_v}"
        tags = dict.fromkeys(self._tag(f) for f in dataclasses.fields(self))  # varlen is said once
        return f"b{self.b} h{heads} s{seq} d{dim} {self.dtype} {self.layout}{''.join(tags)}"

    def _tag(self, f: dataclasses.Field) -> str:
        """What label() says of one field, as its `tag` declares: a dict value -> text, or a
        format of the value, said when the value is set and not the default, the field named by
        `tag_needs` is set too, and the value is not that of the field named by `tag_unless`."""
        tag, value = f.metadata.get("tag", ""), getattr(self, f.name)
        if isinstance(tag, dict):
            return tag.get(value, "")
        needs, unless = f.metadata.get("tag_needs"), f.metadata.get("tag_unless")
        quiet = (
            not value
            or value == f.default
            or (needs is not None and not getattr(self, needs))
            or (unless is not None and value == getattr(self, unless))
        )
        return "" if quiet else tag.format(value)


FIELD_LABELS = {f.name: f.metadata["label"] for f in dataclasses.fields(SdpaConfig)}


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
