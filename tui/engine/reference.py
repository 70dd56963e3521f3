"""The fp32 reference, on the same logical tensors the graph read (torch's peer on them: peer.py).

The reference runs on the SAME logical (b, h, s, d) tensors the graph read: layout is
only strides, so nothing is ever permuted (the seed's check permuted logical dims and
compared attention over heads). GQA's query heads are computed by the kv head they share (each
kv head's group at once, never copied to every query head) and the causal mask applied
explicitly, so the check does not trust any attention kernel, torch's included.

On the CPU it goes in chunks of at most CPU_CHUNK_FLOPS (a fraction of a second of a small CPU),
as do its drawn inputs, with a check between them (cancel.between_chunks): a cancel stops it
within one chunk.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..model.config import REFERENCE_CHUNK_BYTES, SdpaConfig
from ..model.tensor_plan import TensorSpec, drawn_inputs
from .cancel import between_chunks
from .modifiers import capped, keeps
from .recipes import shaped

REFERENCE_NAME = "fp32 math on the same logical tensors (explicit mask, GQA expanded, TF32 off)"
CPU_CHUNK_FLOPS = 1 << 27  # one chunk of the CPU reference (the peer: 4 times): 0.05-0.1 s of 2 CPUs
DRAW_CHUNK_ELEMENTS = 1 << 22  # numbers drawn on the CPU at once (0.1 s): the same numbers


def torch_dtype(torch: Any, dtype: str) -> Any:
    names = {"fp16": "float16", "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp32": "float32"}
    return getattr(torch, names[dtype])


def empty(torch: Any, spec: TensorSpec, device: Any) -> Any:
    """An uninitialised tensor of the spec's logical dims whose memory has the spec's strides."""
    return torch.empty_strided(spec.dims, spec.strides, dtype=torch_dtype(torch, spec.dtype), device=device)


def drawn(torch: Any, spec: TensorSpec, gen: Any, device: Any) -> Any:
    """N(0, 1) numbers from `gen` in the spec's logical order, stored as the spec says. On the CPU
    a large tensor is drawn in pieces, a check between them: the same numbers, since the CPU's
    generator fills 16 at a time from one sequence (pieces of multiples of 16, the last at least 16)."""
    t = empty(torch, spec, device)
    pieces = draw_pieces(spec.dims, DRAW_CHUNK_ELEMENTS) if torch.device(device).type == "cpu" else None
    if not pieces:
        return t.copy_(torch.randn(spec.dims, generator=gen, device=device, dtype=torch.float32))
    for piece in pieces:
        between_chunks()
        part = t[piece]
        part.copy_(torch.randn(part.shape, generator=gen, dtype=torch.float32))
    return t


def draw_pieces(dims: tuple[int, ...], most: int = DRAW_CHUNK_ELEMENTS) -> list[tuple] | None:
    """Indices of `dims` in logical order, each at most about `most` numbers and a multiple of 16
    but the last (at least 16); None where one draw will do, or no such pieces exist."""
    total = math.prod(dims)
    if total <= 2 * most:
        return None
    k, unit = 0, total // dims[0]  # the first dim whose entries each hold at most `most`
    while unit > most and k < len(dims) - 1:
        k += 1
        unit //= dims[k]
    while k > 0 and dims[k] * unit % 16:  # a piece in one entry of dims[k - 1], each a multiple of 16
        unit *= dims[k]
        k -= 1
    multiple = 16 // math.gcd(unit, 16)
    step = max(multiple, most // unit // multiple * multiple)
    pieces = [
        (*prefix, slice(j, min(j + step, dims[k])))
        for prefix in itertools.product(*(range(n) for n in dims[:k]))
        for j in range(0, dims[k], step)
    ]
    sizes = [(p[-1].stop - p[-1].start) * unit for p in pieces]
    return pieces if all(n % 16 == 0 for n in sizes[:-1]) and sizes[-1] >= 16 else None


def drawn_values(config: SdpaConfig, device: str, seed: int = 0) -> dict[str, Any]:
    """Random q, k, v in the config's dtype, stored in its layout (logical dims b, h, s, d), and
    the bias where there is one, drawn in that order from one seeded generator (then scaled,
    shifted or made near-equal as the input recipe asks: recipes.shaped); for a training
    step also dO, from `seed + 1` (random_d_o). For FP8 configs q, k, v are fp32, the values
    before quantisation (see fp8.quantise)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    specs = drawn_inputs(config)
    values = {
        name: drawn(torch, specs[name], gen, device) for name in ("q", "k", "v", "bias") if name in specs
    }
    if config.backward:
        values["dO"] = drawn(torch, specs["dO"], torch.Generator(device=device).manual_seed(seed + 1), device)
    shaped(config, values)  # the input recipe's magnitudes, where it asks for any (q and k)
    return values


def make_inputs(config: SdpaConfig, device: str, seed: int = 0) -> tuple[Any, Any, Any, Any]:
    """q, k, v and the bias (or None) of drawn_values."""
    values = drawn_values(config.replace(backward=False), device, seed)
    return values["q"], values["k"], values["v"], values.get("bias")


def random_d_o(config: SdpaConfig, device: str, seed: int) -> Any:
    """A seeded N(0, 1) output gradient dO, stored as o is (fp32 for FP8 configs)."""
    import torch

    return drawn(torch, drawn_inputs(config)["dO"], torch.Generator(device=device).manual_seed(seed), device)


def keep_mask(config: SdpaConfig, rows: range, device: Any, batch: int = 0, keys: range | None = None) -> Any:
    """Boolean (len(rows), len(keys)): True where query i may attend key j in one batch entry
    (causal band, sliding window, real lengths, the variant's mask: modifiers.keeps); None when
    nothing is masked. Keys: all by default."""
    import torch

    lo, hi = config.band(batch)
    lq, lkv = config.lengths(batch)
    if lo is None and hi is None and not config.padded and not config.modifier.masks:
        return None
    keys = keys or range(config.s_kv)
    i = torch.arange(rows.start, rows.stop, device=device).unsqueeze(1)
    j = torch.arange(keys.start, keys.stop, device=device).unsqueeze(0)
    keep = (j < lkv) & (i < lq)
    if hi is not None:
        keep &= j <= i + hi
    if lo is not None:
        keep &= j > i + lo
    return keep & keeps(config.modifier, i, j) if config.modifier.masks else keep


def key_span(config: SdpaConfig, batch: int, rows: range) -> range:
    """The keys some query row of the block may attend (causal band, sliding window, real
    lengths): every other key is masked for all of its rows, so its column adds exp(-inf) = 0 and
    is left out. A causal block of the 32k context then computes half the scores. All keys where
    no row attends any (the block's rows are all padding), so such rows still read as empty."""
    if config.modifier.masks:  # alone: cuDNN takes a score modifier beside no other mask
        return range(*config.modifier.keys(rows.start, rows.stop, config.s_kv))
    lo, hi = config.band(batch)
    _, lkv = config.lengths(batch)
    start = 0 if lo is None else max(0, rows.start + lo + 1)
    stop = min(config.s_kv, lkv)
    if hi is not None:
        stop = min(stop, rows.stop + hi)
    return range(start, stop) if start < stop else range(config.s_kv)


def alibi_slopes(h: int) -> list[float]:
    """ALiBi's per-head slopes (Press et al.), as cuDNN applies them: 2^(-8k/n) for the nearest
    power of two n <= h, then the odd multiples of 2^(-4/n) for the remaining heads."""
    n = 2 ** math.floor(math.log2(h))
    slopes = [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]
    slopes += [2.0 ** (-4.0 * k / n) for k in range(1, 2 * (h - n), 2)]
    return slopes


def additive_terms(
    config: SdpaConfig,
    batch: int,
    heads: range,
    rows: range,
    bias: Any,
    device: Any,
    keys: range | None = None,
) -> Any:
    """What is added to the scaled scores for one block: bias, ALiBi and -inf where masked.
    Shape (len(heads) or 1, len(rows), len(keys)) in fp32; None when nothing is added. Keys: all
    by default."""
    import torch

    keys = keys or range(config.s_kv)
    term = None
    if bias is not None:
        b_idx = batch if bias.shape[0] > 1 else 0
        h_sel = slice(heads.start, heads.stop) if bias.shape[1] > 1 else slice(0, 1)
        term = bias[b_idx, h_sel, rows.start : rows.stop, keys.start : keys.stop].float()
    if config.alibi:
        slopes = torch.tensor(alibi_slopes(config.h_q)[heads.start : heads.stop], device=device).view(
            -1, 1, 1
        )
        i = torch.arange(rows.start, rows.stop, device=device, dtype=torch.float32).view(1, -1, 1)
        j = torch.arange(keys.start, keys.stop, device=device, dtype=torch.float32).view(1, 1, -1)
        alibi = (j - i) * slopes
        term = alibi if term is None else term + alibi
    keep = keep_mask(config, rows, device, batch, keys)
    if keep is not None:
        blocked = torch.zeros(keep.shape, device=device).masked_fill_(~keep, float("-inf")).unsqueeze(0)
        term = blocked if term is None else term + blocked
    return term


def valid_rows(config: SdpaConfig, device: Any, side: int = 0) -> Any:
    """(b, 1, s, 1) True for real rows of the query side (side 0) or the key/value side (1); None
    without padding. Padded rows are not compared (cuDNN does not promise to write them)."""
    import torch

    if not config.padded:
        return None
    s = config.s_kv if side else config.s_q
    lens = torch.tensor([config.lengths(bi)[side] for bi in range(config.b)], device=device).view(-1, 1, 1, 1)
    return torch.arange(s, device=device).view(1, 1, -1, 1) < lens


@contextlib.contextmanager
def _full_fp32() -> Any:
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def block_steps(config: SdpaConfig) -> tuple[int, int]:
    """(heads, rows) per step so one step's fp32 scores stay under REFERENCE_CHUNK_BYTES."""
    row_bytes = config.s_kv * 4
    per_head = config.s_q * row_bytes
    if per_head * config.h_q <= REFERENCE_CHUNK_BYTES:
        return config.h_q, config.s_q
    if per_head <= REFERENCE_CHUNK_BYTES:
        return max(1, REFERENCE_CHUNK_BYTES // per_head), config.s_q
    return 1, max(1, REFERENCE_CHUNK_BYTES // row_bytes)


def chunk_steps(config: SdpaConfig, device: Any, work: float = 1.0) -> tuple[int, int]:
    """(heads, rows) a chunk of the reference (and of the CPU peer) takes: block_steps's, on the
    CPU no more than CPU_CHUNK_FLOPS (`work`: a score's cost against the forward's, 3.5 for
    autograd's), the heads whole GQA groups or a part of one (a chunk reads whole kv heads)."""
    heads, rows = block_steps(config)
    if getattr(device, "type", device) == "cpu":
        per_row = 2 * config.s_kv * (config.d_qk + config.d_v) * work
        heads = min(heads, max(1, int(CPU_CHUNK_FLOPS // (per_row * config.s_q))))
        if heads == 1:
            rows = min(rows, max(1, int(CPU_CHUNK_FLOPS // per_row)))
    group = config.h_q // config.h_kv
    if heads >= group:
        return heads // group * group, rows
    return max(n for n in range(1, heads + 1) if group % n == 0), rows


def _blocks(
    config: SdpaConfig, device: Any, progress: Callable[[float], None] | None = None, work: float = 1.0
) -> Any:
    """(batch, heads, rows, kv heads) chunks of chunk_steps, a check for a cancel before each.
    `progress` hears the share done, at most once a second: a long reference is not a hang."""
    group = config.h_q // config.h_kv
    heads_step, rows_step = chunk_steps(config, device, work)
    total = config.b * math.ceil(config.h_q / heads_step) * math.ceil(config.s_q / rows_step)
    done, last = 0, time.perf_counter()
    for bi in range(config.b):
        for h0 in range(0, config.h_q, heads_step):
            h1 = min(h0 + heads_step, config.h_q)
            kv = range(h0 // group, (h1 - 1) // group + 1)  # GQA: the kv heads the query heads read
            for r0 in range(0, config.s_q, rows_step):
                between_chunks()
                yield bi, range(h0, h1), range(r0, min(r0 + rows_step, config.s_q)), kv
                done += 1
                if progress is not None and time.perf_counter() - last >= 1.0:
                    progress(done / total)
                    last = time.perf_counter()


def _kv_blocks(k: Any, v: Any, blocks: Any, leaves: bool = False) -> Any:
    """_blocks' chunks as (batch, heads, rows, K, V): the chunk's kv heads in fp32 (V None when
    `v` is), read once for the chunks in a row that share them; autograd's leaves if asked."""
    import torch

    held, dense = (), torch.contiguous_format
    for bi, heads, rows, kv in blocks:
        if not held or held[0] != (bi, kv):
            pair = [
                t if t is None else t[bi, kv.start : kv.stop].to(torch.float32, memory_format=dense)
                for t in (k, v)
            ]
            pair = [t if t is None else t.detach().requires_grad_(leaves) for t in pair]
            held = ((bi, kv), *pair)
        yield bi, heads, rows, held[1], held[2]


def _by_kv_head(x: Any, kv_heads: int) -> Any:
    """(heads, rows, n) as (kv heads, the rows of the query heads that share each, n): GQA's
    query heads of one kv head in one matrix, so K and V are never repeated."""
    return x.reshape(kv_heads, -1, x.shape[-1])


def _attend(
    config: SdpaConfig,
    bi: int,
    heads: range,
    rows: range,
    qb: Any,
    kb: Any,
    vb: Any,
    bias: Any,
    dropout_mask: Any,
    sink: Any = None,
) -> Any:
    """One block of softmax(q k^T * scale + terms) v in fp32; differentiable. A row with no kept
    key (a padded row) outputs 0 and passes no gradient. With sink tokens, each head's sink logit
    joins every row's softmax as one more column that adds nothing to the output. Only the
    block's key span is computed (key_span). `kb` and `vb`: the kv heads the block's query
    heads read (one each, or one a query head)."""
    import torch

    keys = key_span(config, bi, rows)
    scores = block_scores(config, bi, heads, rows, qb, kb, bias, sink, keys)
    empty = ~torch.isfinite(scores.amax(dim=-1, keepdim=True))
    p = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    if sink is not None:
        p = p[..., :-1]
    if dropout_mask is not None:
        kept = dropout_mask[bi, heads.start : heads.stop, rows.start : rows.stop, keys.start : keys.stop]
        p = p * kept.float() / (1.0 - config.dropout)
    out = torch.matmul(_by_kv_head(p, vb.shape[0]), vb[..., keys.start : keys.stop, :])
    return out.view(len(heads), len(rows), -1)


def block_scores(
    config: SdpaConfig,
    bi: int,
    heads: range,
    rows: range,
    qb: Any,
    kb: Any,
    bias: Any,
    sink: Any = None,
    keys: range | None = None,
) -> Any:
    """One block's scores q k^T * scale (a variant's softcap applied) + bias + ALiBi, -inf where
    masked, and the sink logits as a last column when there are sink tokens: (heads, rows,
    len(keys) [+ 1]) fp32, for `kb`'s keys in `keys` (all by default). `kb`: the kv heads that the block's query heads read, one
    each (GQA expanded) or one for each group of query heads that shares it."""
    import torch

    keys = keys or range(config.s_kv)
    k_t = kb[..., keys.start : keys.stop, :].transpose(-1, -2)
    scores = torch.matmul(_by_kv_head(qb, kb.shape[0]), k_t).view(len(heads), len(rows), -1) * config.scale
    scores = capped(config.modifier, scores)  # a softcap, before the bias as cuDNN's score_mod
    term = additive_terms(config, bi, heads, rows, bias, qb.device, keys)
    if term is not None:
        scores = scores + term
    if sink is not None:
        column = sink.reshape(-1)[heads.start : heads.stop].float().view(-1, 1, 1)
        scores = torch.cat([scores, column.expand(-1, scores.shape[-2], 1)], dim=-1)
    return scores


def softmax_rows(config: SdpaConfig, q: Any, k: Any, bias: Any = None, sink: Any = None) -> tuple[Any, Any]:
    """Each query row's max score and sum of exp(score - max), sink included, in fp32
    (b, h_q, s_q, 1) each: what cuDNN's score_max and score_sum_exp hold, and its stats
    (max + log sum) for the backward."""
    import torch

    top = torch.full((*config.o_dims[:3], 1), float("-inf"), dtype=torch.float32, device=q.device)
    total = torch.zeros_like(top)
    with _full_fp32(), torch.no_grad():
        for bi, heads, rows, kb, _ in _kv_blocks(k, None, _blocks(config, q.device)):
            qb = q[bi, heads.start : heads.stop, rows.start : rows.stop].float()
            scores = block_scores(config, bi, heads, rows, qb, kb, bias, sink, key_span(config, bi, rows))
            m = scores.amax(dim=-1, keepdim=True)
            at = (bi, slice(heads.start, heads.stop), slice(rows.start, rows.stop))
            top[at], total[at] = m, (scores - m).exp().sum(-1, keepdim=True)
    return top, total


def reference_fp32(
    config: SdpaConfig,
    q: Any,
    k: Any,
    v: Any,
    bias: Any = None,
    dropout_mask: Any = None,
    progress: Callable[[float], None] | None = None,
    sink: Any = None,
) -> Any:
    """softmax(q k^T * scale + bias + alibi + mask) v in fp32, as a contiguous (b, h_q, s_q, d_v)
    tensor. A query row with no kept key (a padded row) outputs 0. With dropout, the softmax
    weights are multiplied by `dropout_mask` (b, h_q, s_q, s_kv of 0 and 1, the mask cuDNN drew)
    and scaled by 1/(1 - p); without a mask dropout is off."""
    import torch

    out = torch.empty(config.o_dims, dtype=torch.float32, device=q.device)
    with _full_fp32(), torch.no_grad():
        for bi, heads, rows, kf, vf in _kv_blocks(k, v, _blocks(config, q.device, progress)):
            qb = q[bi, heads.start : heads.stop, rows.start : rows.stop].float()
            out[bi, heads.start : heads.stop, rows.start : rows.stop] = _attend(
                config, bi, heads, rows, qb, kf, vf, bias, dropout_mask, sink
            )
    return out


def vjp(torch: Any, output: Any, inputs: tuple, grad_output: Any) -> tuple[Any, ...]:
    """The gradients of `inputs` for `grad_output` at `output`, as autograd of the scalar
    sum(output * grad_output): to the bit what passing grad_output gives (the product's backward
    multiplies it by exactly 1.0), without autograd's shape check of a given grad_output, which
    imports torch.fx's symbolic shapes and sympy (2.3 s of an engine process on the H200)."""
    return torch.autograd.grad((output * grad_output).sum(), inputs)


def reference_grads(
    config: SdpaConfig,
    q: Any,
    k: Any,
    v: Any,
    d_o: Any,
    bias: Any = None,
    dropout_mask: Any = None,
    progress: Callable[[float], None] | None = None,
    sink: Any = None,
) -> tuple[Any, ...]:
    """dQ, dK, dV of the reference for the output gradient `d_o`, by torch fp32 autograd, one
    block of query rows and heads at a time (so the scores never exist whole); GQA's kv heads
    sum the gradients of the query heads that share them. Contiguous fp32 (b, h, s, d). With
    sink tokens, the sink logits' gradient dSink (1, h_q, 1, 1) follows."""
    import torch

    dsink = None if sink is None else torch.zeros((1, config.h_q, 1, 1), dtype=torch.float32, device=q.device)
    dq = torch.zeros(config.q_dims, dtype=torch.float32, device=q.device)
    dk = torch.zeros(config.k_dims, dtype=torch.float32, device=q.device)
    dv = torch.zeros(config.v_dims, dtype=torch.float32, device=q.device)
    group = config.h_q // config.h_kv
    with _full_fp32(), torch.enable_grad():
        blocks = _blocks(config, q.device, progress, work=3.5)  # the forward again, and its backward
        for bi, heads, rows, kf, vf in _kv_blocks(k, v, blocks, leaves=True):
            hs, rs = slice(heads.start, heads.stop), slice(rows.start, rows.stop)
            qb = q[bi, hs, rs].float().requires_grad_()
            sb = None if sink is None else sink.float().detach().requires_grad_()
            o = _attend(config, bi, heads, rows, qb, kf, vf, bias, dropout_mask, sb)
            leaves = (qb, kf, vf) if sb is None else (qb, kf, vf, sb)
            with warnings.catch_warnings():  # autograd's worker thread starts without a current CUDA context
                warnings.filterwarnings("ignore", message="Attempting to run cuBLAS")
                gq, gk, gv, *gs = vjp(torch, o, leaves, d_o[bi, hs, rs].float())
            kvs = slice(heads.start // group, (heads.stop - 1) // group + 1)
            dq[bi, hs, rs] = gq
            dk[bi, kvs] += gk
            dv[bi, kvs] += gv
            if gs:
                dsink += gs[0].view(dsink.shape)
    return (dq, dk, dv) if dsink is None else (dq, dk, dv, dsink)
