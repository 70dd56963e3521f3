"""The tensors of each pass's graph, worked out once from the configuration: name, logical dims,
strides, dtype and, for packed tokens, the offsets tensor. The graph declares exactly these, so
nothing downstream asks the configuration again for a shape.

A pass reads its `reads` (every one a keyword of the SDPA operation), the operation returns
tensors by position (`returns` names them; "" for one left virtual), and the graph writes its
`writes`: returned tensors, and read tensors the operation fills in (row max, sink gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import SdpaConfig
from .inputs import recipe_of, spare_pages
from .layouts import strides

# The tensors packed at ragged offsets, and the side whose real lengths they follow (0: q, 1: k/v)
RAGGED_SIDE = {"q": 0, "o": 0, "dO": 0, "dQ": 0, "k": 1, "v": 1, "dK": 1, "dV": 1}
# The scale tensors the FP8 operations read, by keyword: fp32 (1, 1, 1, 1) each (fp8.py sets them).
FP8_FORWARD_SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
FP8_BACKWARD_SCALES = ("descale_q", "descale_k", "descale_v", "descale_o", "descale_dO", "descale_s", "descale_dP",
                       "scale_s", "scale_dQ", "scale_dK", "scale_dV", "scale_dP")  # fmt: skip
# The amax outputs of the FP8 operations, in the order the operation returns them.
FORWARD_AMAX = ("amax_o",)
BACKWARD_AMAX = ("amax_dq", "amax_dk", "amax_dv", "amax_dp")
PAGE_TABLES = {"k": "paged_attention_k_table", "v": "paged_attention_v_table"}  # a pool's table
ROW_OUTPUTS = ("score_max", "score_sum_exp")  # the forward's softmax max and sum of exponents
FILLED_IN = (*ROW_OUTPUTS, "dSink_token")  # read tensors the operation writes (the sink's gradient)
SCALAR = (1, 1, 1, 1)


def is_packed(config: SdpaConfig, name: str) -> bool:
    """Whether the graph reads `name` as packed tokens: THD's tensors, but for a paged cache's K and
    V, which are pools of pages found through their tables (no ragged offsets)."""
    return config.packed and name in RAGGED_SIDE and not (config.paged and name in PAGE_TABLES)


@dataclass(frozen=True)
class TensorSpec:
    """One graph tensor: the device tensor of the same name has these dims, strides and dtype."""

    name: str
    dims: tuple[int, int, int, int]
    strides: tuple[int, int, int, int]
    dtype: str
    offsets: TensorSpec | None = None  # packed tokens: where each sequence starts (b + 1 int32)


@dataclass(frozen=True)
class PassTensors:
    reads: tuple[TensorSpec, ...]
    returns: tuple[str, ...]
    writes: tuple[TensorSpec, ...]
    tokens: tuple[int, int]  # real tokens of the query side and the key/value side, over the batch


def pool_dims(config: SdpaConfig, d: int, pages: int) -> tuple[int, int, int, int]:
    """A page pool of `pages` pages: (pages, h_kv, page size, d), each page's tokens contiguous per head."""
    return (pages, config.h_kv, config.page_size or 1, d)


def bias_dims(config: SdpaConfig) -> tuple[int, int, int, int]:
    return (
        config.b if config.bias[0] == "b" else 1,
        config.h_q if config.bias[-1] == "h" else 1,
        config.s_q,
        config.s_kv,
    )


def bias_dtype(config: SdpaConfig) -> str:
    """The bias is stored in the 16-bit io type (fp16 next to FP8 inputs)."""
    return "fp16" if config.fp8 else config.dtype


def stats_dims(config: SdpaConfig) -> tuple[int, int, int, int]:
    """A per-query-row fp32 output: the softmax stats, its max or its sum of exponents."""
    return (config.b, config.h_q, config.s_q, 1)


def tensor_plan(config: SdpaConfig, backward: bool = False, rng_dump: bool = False) -> PassTensors:
    """The forward's tensors (q, k, v, o, stats ...) or, with `backward`, the backward's (q, k, v,
    o, dO, stats ... to dQ, dK, dV). With `rng_dump`, the forward also writes the dropout mask it
    drew. FP8 graphs read per-tensor descales and write amax; the forward's Amax_S stays virtual:
    the frontend documents scale_s from its bound (448 for E4M3), and declaring it would limit
    the engines."""
    c = config
    options, (outputs, returns) = _options(c, backward, rng_dump), _outputs(c, backward)
    spec = _Specs(c.packed, c.b, recipe_of(c).gap)  # the layout's strides, the recipe's gaps
    lengths_q, lengths_kv = c.seq_lens_q or (c.s_q,) * c.b, c.seq_lens_kv or (c.s_kv,) * c.b  # as c.lengths()
    if c.paged:  # the pools: (pages, h_kv, page size, d), enough pages for each real length (and spares)
        pages = sum(-(-kv // c.page_size) for kv in lengths_kv) + spare_pages(c)
        k_dims, v_dims, kv_layout = pool_dims(c, c.d_qk, pages), pool_dims(c, c.d_v, pages), "BHSD"
    else:
        k_dims, v_dims, kv_layout = c.k_dims, c.v_dims, c.layout
    reads = [spec("q", c.q_dims, c.dtype, c.layout), spec("k", k_dims, c.dtype, kv_layout, c.paged),
             spec("v", v_dims, c.dtype, kv_layout, c.paged)]  # fmt: skip
    if backward:
        reads += [spec("o", c.o_dims, c.o_dtype, c.layout), spec("dO", c.o_dims, c.o_dtype, c.layout),
                  spec("stats", stats_dims(c), "fp32")]  # fmt: skip
    reads += [spec(*option) for option in options]
    writes = [spec(*output) for output in outputs] + [r for r in reads if r.name in FILLED_IN]
    return PassTensors(tuple(reads), returns, tuple(writes), (sum(lengths_q), sum(lengths_kv)))


def _outputs(
    c: SdpaConfig, backward: bool
) -> tuple[list[tuple[str, tuple[int, int, int, int], str, str]], tuple[str, ...]]:
    """The tensors the operation returns, as (name, dims, dtype, layout), and the names of what it
    returns by position ("" for one left virtual): the FP8 amax first, then the pass's outputs."""
    amax = (BACKWARD_AMAX if backward else FORWARD_AMAX) if c.fp8 else ()
    out = [(name, SCALAR, "fp32", "BHSD") for name in amax]
    if backward:
        out += [("dQ", c.q_dims, c.dtype, c.layout), ("dK", c.k_dims, c.dtype, c.layout),
                ("dV", c.v_dims, c.dtype, c.layout)]  # fmt: skip
        return out, ("dQ", "dK", "dV", *amax)
    stats = c.backward or c.softmax_out == "stats"
    out += [("o", c.o_dims, c.o_dtype, c.layout)]
    out += [("stats", stats_dims(c), "fp32", "BHSD")] if stats else []
    return out, ("o", "stats" if stats else "", *(("", *amax) if c.fp8 else ()))


def drawn_inputs(config: SdpaConfig) -> dict[str, TensorSpec]:
    """What the engine draws at random, as the reference and the peers read it: q, k, v and dO
    in logical (b, h, s, d) dims stored in the config's layout (fp32 for FP8 configs: the values
    before quantisation), and the bias where there is one (storage.py turns these into pages and
    packed tokens)."""
    c = config
    bias = bias_dims(c) if c.bias != "none" else None
    spec, dtype = _Specs(False, c.b, recipe_of(c).gap), "fp32" if c.fp8 else c.dtype
    drawn = {name: spec(name, dims, dtype, c.layout)
             for name, dims in (("q", c.q_dims), ("k", c.k_dims), ("v", c.v_dims), ("dO", c.o_dims))}  # fmt: skip
    if bias is not None:
        drawn["bias"] = spec("bias", bias, bias_dtype(c))
    return drawn


def _options(
    c: SdpaConfig, backward: bool, rng_dump: bool
) -> list[tuple[str, tuple[int, int, int, int], str]]:
    """The option tensors the config asks for: lengths, dropout seed and offset, bias, page
    tables, sinks, the row outputs the forward fills in, the sink's gradient, the FP8 scales."""
    out = []
    if c.padded:
        out += [(name, (c.b, 1, 1, 1), "int32") for name in ("seq_len_q", "seq_len_kv")]
    if c.dropout:
        out += [(name, SCALAR, "int64") for name in ("seed", "offset")]
        out += [("rng_dump", (c.b, c.h_q, c.s_q, c.s_kv), "fp32")] if rng_dump and not backward else []
    if c.bias != "none":
        out.append(("bias", bias_dims(c), bias_dtype(c)))
    if c.paged:  # one table per pool (the backward has none: its operation refuses them)
        per_sequence = -(-c.s_kv // c.page_size)
        out += [(name, (c.b, 1, per_sequence, 1), "int32") for name in PAGE_TABLES.values()]
    if c.sink:
        out.append(("sink_token", (1, c.h_q, 1, 1), "fp32"))
    if c.softmax_out == "max_sum_exp" and not backward:
        out += [(name, stats_dims(c), "fp32") for name in ROW_OUTPUTS]
    if c.sink and backward:  # the sink's gradient, one per head
        out.append(("dSink_token", (1, c.h_q, 1, 1), "fp32"))
    if c.fp8:
        out += [(name, SCALAR, "fp32") for name in (FP8_BACKWARD_SCALES if backward else FP8_FORWARD_SCALES)]
    return out


class _Specs:
    """Makes the specs of one configuration: strides from the layout (each head-dim row of q, k,
    v, o and their gradients followed by `gap` elements, pools aside), offsets for packed tokens."""

    def __init__(self, packed: bool, b: int, gap: int = 0):
        self.packed, self.b, self.gap = packed, b, gap

    def __call__(
        self, name: str, dims: tuple[int, int, int, int], dtype: str, layout: str = "BHSD", pool: bool = False
    ) -> TensorSpec:
        offsets = None
        if self.packed and name in RAGGED_SIDE and not pool:  # a pool's pages are found by its table
            offsets = TensorSpec(f"{name}_offsets", (self.b + 1, 1, 1, 1), (1, 1, 1, 1), "int32")
        gap = self.gap if name in RAGGED_SIDE and not pool else 0
        return TensorSpec(name, dims, strides(dims, layout, gap), dtype, offsets)
