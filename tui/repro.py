"""The reproduction script: a standalone Python file that reproduces one configuration with
cudnn and torch only, checks it against fp32 math on the same logical tensors and prints the
kernel time measured the way the engine measures it; its last line is `RESULT {json}`."""

from __future__ import annotations

import textwrap

from .engine.config import SdpaConfig
from .engine.graph import bias_dims
from .engine.layouts import LAYOUTS
from .engine.reference import GRAD_TOLERANCES, TOLERANCES


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cudnn-sdpa-explorer")
    except PackageNotFoundError:
        return "unknown"


# The whole script, every variant in one place. A line tagged %cond,...% at its start is kept only
# when every condition holds (!cond: when it does not; see _flags), so a forward fp16 script reads
# like the seed's and carries no FP8 or backward code. Then str.format fills in the numbers
# (literal braces are doubled).
SCRIPT_TEMPLATE = '''#!/usr/bin/env python3
"""Reproduce one cuDNN SDPA configuration: {label}

Exported by sdpa-explorer {tool_version}. Needs only the cuDNN frontend (nvidia-cudnn-frontend)
and torch with a CUDA GPU. Builds the graph, runs it, checks it against fp32 math on the same
logical (b, h, s, d) tensors (layout is only strides: nothing is permuted), and prints the
kernel time: CUPTI kernel durations while a CUDA graph of N executions is replayed.
{doc_extra}Exit code 0 when the output{and_gradients} within tolerance.
"""

import json
import math
import statistics
import sys

import cudnn
import torch
from torch.profiler import ProfilerActivity, profile

B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = {b}, {h_q}, {h_kv}, {s_q}, {s_kv}, {d_qk}, {d_v}
DTYPE, IO_TYPE = torch.{torch_dtype}, cudnn.data_type.{cudnn_dtype}  # q, k, v{grads_too}
O_DTYPE, O_TYPE = torch.{torch_o_dtype}, cudnn.data_type.{cudnn_o_dtype}  # o
LAYOUT, MEMORY_ORDER = "{layout}", {order}  # memory order of the logical dims (b, h, s, d), outermost first
ATTN_SCALE = {scale!r}
CAUSAL = "{causal}"  # none | top_left | bottom_right (bottom-right aligns the diagonal to the real lengths)
WINDOW = {window!r}  # sliding window ({window_keyword}); None: no window
SEQ_LENS_Q, SEQ_LENS_KV = {seq_lens_q!r}, {seq_lens_kv!r}  # real lengths (padding mask); None: all full
ALIBI = {alibi!r}
BIAS_DIMS = {bias_dims!r}  # additive bias (1|b, 1|h, s_q, s_kv); None: no bias
IMPLEMENTATION = {implementation!r}  # cudnn.attention_implementation name; None: AUTO
DROPOUT, DROPOUT_SEED = {dropout!r}, {dropout_seed!r}  # dropout probability (0: off) and the mask's seed
HEURISTICS = [{heuristics}]
%!fp8%ATOL, RTOL = {atol!r}, {rtol!r}  # the output's tolerance
%fp8%ATOL, RTOL = {atol!r}, {rtol!r}  # the output's tolerance; atol is this share of max |reference| (per-tensor scaling)
%bwd%GRAD_ATOL, GRAD_RTOL = {grad_atol!r}, {grad_rtol!r}  # atol is this share of max |reference gradient| (it grows with s)
%bwd%DETERMINISTIC = {deterministic!r}  # ask the backward for a deterministic algorithm
%fp8%FP8_MAX = 448.0  # the largest finite E4M3 value
SEED = {seed}

q_dims, k_dims = (B, H_Q, S_Q, D_QK), (B, H_KV, S_KV, D_QK)
v_dims, o_dims = (B, H_KV, S_KV, D_V), (B, H_Q, S_Q, D_V)


def strides(dims):
    out, step = [0, 0, 0, 0], 1
    for axis in reversed(MEMORY_ORDER):
        out[axis] = step
        step *= dims[axis]
    return tuple(out)


def allocate(dims, dtype=DTYPE):
    """Logical dims, physical layout: allocate in memory order, view back as (b, h, s, d)."""
    physical = torch.empty([dims[a] for a in MEMORY_ORDER], dtype=dtype, device="cuda")
    view = physical.permute(*[MEMORY_ORDER.index(a) for a in range(4)])
    assert view.stride() == strides(dims)
    return view


def poison(t):
    """NaN everywhere, so an element the graph never writes cannot pass (E4M3's NaN is the byte 0x7f)."""
    if t.element_size() == 1:
        t.view(torch.uint8).fill_(0x7F)
    else:
        t.fill_(float("nan"))
%fp8%
%fp8%
%fp8%def quantise(x):
%fp8%    """Per-tensor scaling: x * 448/amax(x) rounded to E4M3 in x's layout, and the descale that undoes it."""
%fp8%    amax = float(x.abs().max().item())
%fp8%    scale = FP8_MAX / amax if amax > 0 else 1.0
%fp8%    x8 = torch.empty_like(x, dtype=torch.float8_e4m3fn)
%fp8%    x8.copy_(x * scale)
%fp8%    return x8, 1.0 / scale
%fp8%
%fp8%
%fp8%def scalar(value):
%fp8%    """A scale or amax tensor: fp32 (1, 1, 1, 1)."""
%fp8%    return torch.full((1, 1, 1, 1), value, dtype=torch.float32, device="cuda")


gen = torch.Generator(device="cuda").manual_seed(SEED)
%!fp8%q, k, v = (allocate(d) for d in (q_dims, k_dims, v_dims))
%fp8%q, k, v = (allocate(d, torch.float32) for d in (q_dims, k_dims, v_dims))  # the values before rounding to E4M3
for t, d in ((q, q_dims), (k, k_dims), (v, v_dims)):
    t.copy_(torch.randn(d, generator=gen, device="cuda", dtype=torch.float32))
%fp8%(q, descale_q), (k, descale_k), (v, descale_v) = quantise(q), quantise(k), quantise(v)
bias = None
if BIAS_DIMS is not None:
    bias = torch.randn(BIAS_DIMS, generator=gen, device="cuda", dtype=torch.float32).to({bias_dtype})
o = allocate(o_dims, O_DTYPE)
poison(o)  # an output that is never written cannot pass
%bwd%stats = torch.empty((B, H_Q, S_Q, 1), dtype=torch.float32, device="cuda")  # the softmax's log-sum-exp per row
%bwd%gen_dO = torch.Generator(device="cuda").manual_seed(SEED + 1)
%bwd,!fp8%dO = allocate(o_dims, O_DTYPE)  # the output gradient: what the layer above sends back
%bwd,fp8%dO = allocate(o_dims, torch.float32)  # the output gradient: what the layer above sends back
%bwd%dO.copy_(torch.randn(o_dims, generator=gen_dO, device="cuda", dtype=torch.float32))
%bwd,fp8%dO, descale_dO = quantise(dO)
%bwd%dQ, dK, dV = allocate(q_dims), allocate(k_dims), allocate(v_dims)
lens_q = list(SEQ_LENS_Q or [S_Q] * B)
lens_kv = list(SEQ_LENS_KV or [S_KV] * B)
%fp8%scale_s = FP8_MAX * (1.0 - DROPOUT)  # the bound of the softmax weights, after dropout's 1/(1-p)
%fp8%scales = {{  # the forward's scale tensors, by sdpa_fp8's keyword
%fp8%    "descale_q": scalar(descale_q), "descale_k": scalar(descale_k), "descale_v": scalar(descale_v),
%fp8%    "descale_s": scalar(1.0 / scale_s), "scale_s": scalar(scale_s), "scale_o": scalar(1.0),
%fp8%}}
%fp8%amax = {{"amax_o": scalar(0.0)}}  # written by the graph: max |o| before scaling (Amax_S stays virtual)
dropout_mask = None  # with dropout: the mask cuDNN draws, dumped below


# ---- the fp32 reference, on the same logical tensors ------------------------------------------
%!fp8%q_ref, k_ref, v_ref = q, k, v
%fp8%q_ref, k_ref, v_ref = (x.float() * s for x, s in ((q, descale_q), (k, descale_k), (v, descale_v)))  # dequantised
%bwd,!fp8%dO_ref = dO
%bwd,fp8%dO_ref = dO.float() * descale_dO


def alibi_slopes(h):
    n = 2 ** math.floor(math.log2(h))
    return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)] + [2.0 ** (-4.0 * i / n) for i in range(1, 2 * (h - n), 2)]


def blocks():
    """(batch, query head, first row, end row): blocks of real query rows whose fp32 scores fit in 256 MiB."""
    rows = max(1, (256 << 20) // (S_KV * 4))
    for bi in range(B):
        for h in range(H_Q):
            for r0 in range(0, lens_q[bi], rows):
                yield bi, h, r0, min(r0 + rows, lens_q[bi])


def attend(bi, h, r0, r1, qb, kf, vf):
    """softmax(q k^T * scale + bias + alibi + mask) v of one block of query rows, in fp32 and
    differentiable. A row that keeps no key outputs 0 (and passes no gradient)."""
    lq, lkv = lens_q[bi], lens_kv[bi]
    align = lkv - lq if CAUSAL == "bottom_right" else 0
    i = torch.arange(r0, r1, device=qb.device).unsqueeze(1)
    j = torch.arange(S_KV, device=qb.device).unsqueeze(0)
    scores = qb @ kf.T * ATTN_SCALE
    if bias is not None:
        scores = scores + bias[bi if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0, r0:r1].float()
    if ALIBI:
        scores = scores + (j - i) * alibi_slopes(H_Q)[h]
    keep = j < lkv
    if CAUSAL != "none":
        keep = keep & (j <= i + align)
    if WINDOW:
        keep = keep & (j > i + align - WINDOW)
    empty = ~keep.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~keep, float("-inf")).masked_fill(empty, 0.0)
    p = torch.softmax(scores, dim=-1).masked_fill(empty, 0.0)
    if dropout_mask is not None:
        p = p * dropout_mask[bi, h, r0:r1] / (1.0 - DROPOUT)
    return p @ vf


def reference():
    """The output in fp32 (padded query rows 0, not compared). TF32 off."""
    torch.backends.cuda.matmul.allow_tf32 = False
    out = torch.zeros(o_dims, dtype=torch.float32, device=q.device)
    group = H_Q // H_KV  # GQA: query head h reads kv head h // group
    with torch.no_grad():
        for bi, h, r0, r1 in blocks():
            kf, vf = k_ref[bi, h // group].float(), v_ref[bi, h // group].float()
            out[bi, h, r0:r1] = attend(bi, h, r0, r1, q_ref[bi, h, r0:r1].float(), kf, vf)
    return out
%bwd%
%bwd%
%bwd%def reference_grads():
%bwd%    """dQ, dK, dV of the reference for the output gradient dO, by fp32 autograd a block at a time
%bwd%    (the scores never exist whole); a kv head shared by GQA sums its query heads' gradients."""
%bwd%    torch.backends.cuda.matmul.allow_tf32 = False
%bwd%    grads = [torch.zeros(dims, dtype=torch.float32, device=q.device) for dims in (q_dims, k_dims, v_dims)]
%bwd%    group = H_Q // H_KV
%bwd%    for bi, h, r0, r1 in blocks():
%bwd%        qb = q_ref[bi, h, r0:r1].float().requires_grad_()
%bwd%        kf = k_ref[bi, h // group].float().requires_grad_()
%bwd%        vf = v_ref[bi, h // group].float().requires_grad_()
%bwd%        with torch.enable_grad():
%bwd%            ob = attend(bi, h, r0, r1, qb, kf, vf)
%bwd%        gq, gk, gv = torch.autograd.grad(ob, (qb, kf, vf), dO_ref[bi, h, r0:r1].float())
%bwd%        grads[0][bi, h, r0:r1] = gq
%bwd%        grads[1][bi, h // group] += gk
%bwd%        grads[2][bi, h // group] += gv
%bwd%    return grads


def real_rows(lens, s, dims):
    """True on the rows of real tokens (padding: the rest are not compared)."""
    rows = torch.arange(s, device=q.device).view(1, 1, -1, 1) < torch.tensor(lens, device=q.device).view(-1, 1, 1, 1)
    return rows.expand(dims)


def compare(got, want, rows, atol, rtol):
    """(max |got - want|, whether every element is within atol + rtol * |want|) over the real rows."""
    got, want = got.float()[rows], want[rows]
    err = (got - want).abs()
    finite = bool(torch.isfinite(got).all())
    mismatched = int((err > atol + rtol * want.abs()).sum()) if finite else got.numel()
    return float(err.max()), finite and mismatched == 0


# ---- cuDNN --------------------------------------------------------------------------------------
handle = cudnn.create_handle()
cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
seq_len_q = torch.tensor(lens_q, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
seq_len_kv = torch.tensor(lens_kv, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
dropout_seed = torch.full((1, 1, 1, 1), DROPOUT_SEED, dtype=torch.int64, device="cuda")
dropout_offset = torch.zeros((1, 1, 1, 1), dtype=torch.int64, device="cuda")


def new_graph():
    return cudnn.pygraph(
        io_data_type={graph_io_type},{graph_io_comment}
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )


def qkv_tensors(graph):
    return (graph.tensor(name="q", dim=q_dims, stride=strides(q_dims), data_type=IO_TYPE),
            graph.tensor(name="k", dim=k_dims, stride=strides(k_dims), data_type=IO_TYPE),
            graph.tensor(name="v", dim=v_dims, stride=strides(v_dims), data_type=IO_TYPE))
%fp8%
%fp8%
%fp8%def scale_tensors(graph, names):
%fp8%    return {{n: graph.tensor(name=n, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.FLOAT) for n in names}}
%fp8%
%fp8%
%fp8%def amax_output(t):
%fp8%    return t.set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(cudnn.data_type.FLOAT)


def mask_options(graph, pack):
    """The keywords of the masks and dropout this configuration asks for; the tensors they read go into `pack`."""
    options = {{}}
    if CAUSAL == "top_left":
        options["use_causal_mask"] = True
    elif CAUSAL == "bottom_right":
        options["use_causal_mask_bottom_right"] = True
    if WINDOW:
        options["{window_keyword}"] = WINDOW
        if CAUSAL == "none":
            options["diagonal_alignment"] = cudnn.diagonal_alignment.TOP_LEFT
    if SEQ_LENS_Q is not None:
        seq_len_q_t = graph.tensor(name="seq_len_q", dim=(B, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT32)
        seq_len_kv_t = graph.tensor(name="seq_len_kv", dim=(B, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT32)
        options.update(use_padding_mask=True, seq_len_q=seq_len_q_t, seq_len_kv=seq_len_kv_t)
        pack.update({{seq_len_q_t: seq_len_q, seq_len_kv_t: seq_len_kv}})
    if ALIBI:
        options["use_alibi_mask"] = True
    if bias is not None:
        bias_t = graph.tensor(name="bias", dim=tuple(bias.shape), stride=bias.stride(), data_type={bias_type})
        options["bias"] = bias_t
        pack[bias_t] = bias
    if DROPOUT:
        seed_t = graph.tensor(name="seed", dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT64)
        offset_t = graph.tensor(name="offset", dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT64)
        options["dropout"] = (DROPOUT, seed_t, offset_t)
        pack.update({{seed_t: dropout_seed, offset_t: dropout_offset}})
    return options


def build(graph):
    """The frontend's phases in the seed's order; the workspace of the plan build_plans() chose."""
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans(HEURISTICS)
    graph.check_support()
    graph.build_plans()
    return torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")


def make_graph(rng_dump=None):
    """The forward graph, built as the seed builds it. With `rng_dump` (a tensor) it also writes the
    dropout mask it draws, to check the output; the timed graph does not dump."""
    graph = new_graph()
    q_t, k_t, v_t = qkv_tensors(graph)
    pack = {{}}
    options = mask_options(graph, pack)
    if rng_dump is not None:
        dump_t = graph.tensor(name="rng_dump", dim=tuple(rng_dump.shape), stride=rng_dump.stride(),
                              data_type=cudnn.data_type.FLOAT)
        options["rng_dump"] = dump_t
        pack[dump_t] = rng_dump
    if IMPLEMENTATION:
        options["implementation"] = getattr(cudnn.attention_implementation, IMPLEMENTATION)
%!fp8%    o_t, stats_t = graph.sdpa(name="sdpa", q=q_t, k=k_t, v=v_t, attn_scale=ATTN_SCALE, generate_stats={training},
%!fp8%                              **options)
%fp8%    scale_t = scale_tensors(graph, scales)
%fp8%    o_t, stats_t, _amax_s, amax_o_t = graph.sdpa_fp8(name="sdpa_fp8", q=q_t, k=k_t, v=v_t, attn_scale=ATTN_SCALE,
%fp8%                                                     generate_stats={training}, **scale_t, **options)
%fp8%    pack.update({{t: scales[n] for n, t in scale_t.items()}})
%fp8%    pack[amax_output(amax_o_t)] = amax["amax_o"]
    o_t.set_output(True).set_dim(o_dims).set_stride(strides(o_dims)).set_data_type(O_TYPE)
%bwd%    stats_t.set_output(True).set_dim(tuple(stats.shape)).set_stride(stats.stride()).set_data_type(cudnn.data_type.FLOAT)
%bwd%    pack[stats_t] = stats
    workspace = build(graph)
    pack.update({{q_t: q, k_t: k, v_t: v, o_t: o}})
    return graph, pack, workspace
%scaled%
%scaled%
%scaled%def delayed_scaling(graph, pack, workspace, outputs):
%scaled%    """FP8 outputs' scales from their amax: execute once with each (amax, scale, descale) at scale 1,
%scaled%    then set the scale to 448/amax (its descale to the inverse), so later executions use E4M3's range."""
%scaled%    for _, scale, descale in outputs:
%scaled%        scale.fill_(1.0)
%scaled%        if descale is not None:
%scaled%            descale.fill_(1.0)
%scaled%    graph.execute(pack, workspace, handle=handle)
%scaled%    torch.cuda.synchronize()
%scaled%    for amax_t, scale, descale in outputs:
%scaled%        value = float(amax_t.item())
%scaled%        value = FP8_MAX / value if value > 0 and value == value else 1.0
%scaled%        scale.fill_(value)
%scaled%        if descale is not None:
%scaled%            descale.fill_(1.0 / value)


graph, pack, workspace = make_graph()
%o8%delayed_scaling(graph, pack, workspace, [(amax["amax_o"], scales["scale_o"], None)])
if DROPOUT:  # the mask the graph draws, dumped by the same graph built with rng_dump
    dropout_mask = torch.empty((B, H_Q, S_Q, S_KV), dtype=torch.float32, device="cuda")
    check_graph, check_pack, check_workspace = make_graph(dropout_mask)
    check_graph.execute(check_pack, check_workspace, handle=handle)
poison(o)
graph.execute(pack, workspace, handle=handle)
torch.cuda.synchronize()

ref = reference()
%!o8%o_values = o.float()
%o8%o_values = o.float() * (1.0 / scales["scale_o"])  # dequantised: o was written times scale_o
%!fp8%atol = ATOL
%fp8%atol = ATOL * max(float(ref.abs().max()), 1e-30)
max_abs, output_passed = compare(o_values, ref, real_rows(lens_q, S_Q, o_dims), atol, RTOL)
%fp8%amax_o, reference_max = float(amax["amax_o"].item()), float(ref.abs().max())
%bwd%
%bwd%
%bwd%# ---- the backward -------------------------------------------------------------------------------
%bwd,fp8%backward_scales = {{  # sdpa_fp8_backward's scale tensors; dQ, dK, dV and dP get delayed scaling
%bwd,fp8%    "descale_q": scales["descale_q"], "descale_k": scales["descale_k"], "descale_v": scales["descale_v"],
%bwd,fp8%    "descale_o": scalar(1.0 / float(scales["scale_o"].item())), "descale_dO": scalar(descale_dO),
%bwd,fp8%    "descale_s": scales["descale_s"], "descale_dP": scalar(1.0), "scale_s": scales["scale_s"],
%bwd,fp8%    "scale_dQ": scalar(1.0), "scale_dK": scalar(1.0), "scale_dV": scalar(1.0), "scale_dP": scalar(1.0),
%bwd,fp8%}}
%bwd,fp8%amax.update({{name: scalar(0.0) for name in ("amax_dQ", "amax_dK", "amax_dV", "amax_dP")}})
%bwd%
%bwd%
%bwd%def make_backward_graph():
%bwd%    """The backward graph: from q, k, v, o, dO and the forward's stats to dQ, dK, dV, with the
%bwd%    forward's masks and dropout (the same seed and offset draw the same mask)."""
%bwd%    graph = new_graph()
%bwd%    q_t, k_t, v_t = qkv_tensors(graph)
%bwd%    o_t = graph.tensor(name="o", dim=o_dims, stride=strides(o_dims), data_type=O_TYPE)
%bwd%    dO_t = graph.tensor(name="dO", dim=o_dims, stride=strides(o_dims), data_type={do_type})
%bwd%    stats_t = graph.tensor(name="stats", dim=tuple(stats.shape), stride=stats.stride(), data_type=cudnn.data_type.FLOAT)
%bwd%    pack = {{}}
%bwd%    options = mask_options(graph, pack)
%refuse%    sys.exit("sdpa_fp8_backward has no option for ALiBi or an additive bias (the frontend would ignore it silently)")
%bwd,!fp8%    dQ_t, dK_t, dV_t = graph.sdpa_backward(name="sdpa_backward", q=q_t, k=k_t, v=v_t, o=o_t, dO=dO_t, stats=stats_t,
%bwd,!fp8,!det%                                           attn_scale=ATTN_SCALE, **options)
%bwd,!fp8,det%                                           attn_scale=ATTN_SCALE, use_deterministic_algorithm=True, **options)
%bwd,fp8%    scale_t = scale_tensors(graph, backward_scales)
%bwd,fp8%    dQ_t, dK_t, dV_t, *amax_t = graph.sdpa_fp8_backward(
%bwd,fp8%        name="sdpa_fp8_backward", q=q_t, k=k_t, v=v_t, o=o_t, dO=dO_t, stats=stats_t, attn_scale=ATTN_SCALE,
%bwd,fp8,det%        use_deterministic_algorithm=True,
%bwd,fp8%        **scale_t, **options)
%bwd,fp8%    pack.update({{t: backward_scales[n] for n, t in scale_t.items()}})
%bwd,fp8%    for name, t in zip(("amax_dQ", "amax_dK", "amax_dV", "amax_dP"), amax_t):
%bwd,fp8%        pack[amax_output(t)] = amax[name]
%bwd%    for t, dims in ((dQ_t, q_dims), (dK_t, k_dims), (dV_t, v_dims)):
%bwd%        t.set_output(True).set_dim(dims).set_stride(strides(dims)).set_data_type(IO_TYPE)
%bwd%    workspace = build(graph)
%bwd%    pack.update({{q_t: q, k_t: k, v_t: v, o_t: o, dO_t: dO, stats_t: stats, dQ_t: dQ, dK_t: dK, dV_t: dV}})
%bwd%    return graph, pack, workspace
%bwd%
%bwd%
%bwd%def gradients():
%bwd%    """One execution of the backward: dQ, dK, dV as the numbers they stand for, in fp32."""
%bwd%    for t in (dQ, dK, dV):
%bwd%        poison(t)
%bwd%    bwd_graph.execute(bwd_pack, bwd_workspace, handle=handle)
%bwd%    torch.cuda.synchronize()
%bwd,!fp8%    return [dQ.float(), dK.float(), dV.float()]
%bwd,fp8%    return [t.float() * (1.0 / backward_scales[f"scale_{{n}}"]) for n, t in (("dQ", dQ), ("dK", dK), ("dV", dV))]
%bwd%
%bwd%
%bwd%bwd_graph, bwd_pack, bwd_workspace = make_backward_graph()
%bwd,fp8%delayed_scaling(bwd_graph, bwd_pack, bwd_workspace, [
%bwd,fp8%    (amax["amax_dQ"], backward_scales["scale_dQ"], None), (amax["amax_dK"], backward_scales["scale_dK"], None),
%bwd,fp8%    (amax["amax_dV"], backward_scales["scale_dV"], None),
%bwd,fp8%    (amax["amax_dP"], backward_scales["scale_dP"], backward_scales["descale_dP"]),
%bwd,fp8%])
%bwd%grad_refs = reference_grads()
%bwd%grads = gradients()
%bwd%grad_max_abs, grad_atol, grad_passed = {{}}, {{}}, True
%bwd%for name, got, want, lens, s in zip(("dQ", "dK", "dV"), grads, grad_refs, (lens_q, lens_kv, lens_kv), (S_Q, S_KV, S_KV)):
%bwd%    grad_atol[name] = GRAD_ATOL * max(float(want.abs().max()), 1e-30)
%bwd%    grad_max_abs[name], ok = compare(got, want, real_rows(lens, s, want.shape), grad_atol[name], GRAD_RTOL)
%bwd%    grad_passed = grad_passed and ok
%bwd%bitwise_repeatable = all(torch.equal(a, b) for a, b in zip(grads, gradients()))  # a second execution
%bwd,fp8%grad_amax = {{name: float(amax["amax_" + name].item()) for name in ("dQ", "dK", "dV", "dP")}}


def kernel_time_us(graph, pack, workspace, replays=20, target_replay_ms=2.0):
    stream = torch.cuda.Stream()
    cudnn.set_stream(handle, stream.cuda_stream)
    with torch.cuda.stream(stream):
        for _ in range(3):
            graph.execute(pack, workspace, handle=handle)
        # a rough per-call figure, only to size the graph: about 2 ms of work per replay
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(5):
            graph.execute(pack, workspace, handle=handle)
        end.record(stream)
    end.synchronize()
    rough_us = max(start.elapsed_time(end) * 1000 / 5, 1.0)
    per_replay = int(min(200, max(3, target_replay_ms * 1000 / rough_us)))
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph, stream=stream):
        for _ in range(per_replay):
            graph.execute(pack, workspace, handle=handle)
    with torch.cuda.stream(stream):
        cuda_graph.replay()
        stream.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                cuda_graph.replay()
            torch.cuda.synchronize()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    kernels = sorted(
        (e.time_range.start, e.time_range.elapsed_us())
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and not (e.name or "").startswith(("Memcpy", "Memset", "[memory]"))
    )
    group = len(kernels) // replays
    per_exec = [sum(d for _, d in kernels[i * group:(i + 1) * group]) / per_replay for i in range(replays)]
    return statistics.median(per_exec)


kernel_us = kernel_time_us(graph, pack, workspace)
%bwd%backward_kernel_us = kernel_time_us(bwd_graph, bwd_pack, bwd_workspace)
flops = {flops}  # two matmuls over the kept scores of the real tokens
%bwd%backward_flops = {backward_flops}  # 2.5x the forward's, by the usual convention
%!bwd%passed = output_passed
%bwd%passed = output_passed and grad_passed and (bitwise_repeatable or not DETERMINISTIC)
print(f"{label}")
print(f"cuDNN {{cudnn.backend_version()}}, frontend {{cudnn.__version__}}, torch {{torch.__version__}}, "
      f"{{torch.cuda.get_device_name()}}")
print(f"max abs error {{max_abs:.3e}} against fp32 (atol {{atol:.3g}}, rtol {{RTOL}}): {{'PASS' if output_passed else 'FAIL'}}")
%fp8%print(f"FP8: amax_o {{amax_o:.4g}} (reference max |o| {{reference_max:.4g}}), scale_o {{float(scales['scale_o'].item()):.4g}}")
print(f"kernel time {{kernel_us:.2f}} us, {{flops / (kernel_us * 1e-6) / 1e12:.1f}} TFLOPS")
%bwd%for name in ("dQ", "dK", "dV"):
%bwd%    print(f"{{name}} max abs error {{grad_max_abs[name]:.3e}} against fp32 autograd (atol {{grad_atol[name]:.3g}}, rtol {{GRAD_RTOL}})")
%bwd%print(f"gradients: {{'PASS' if grad_passed else 'FAIL'}}; bitwise repeatable: {{bitwise_repeatable}}"
%bwd%      + (" (deterministic algorithm asked for)" if DETERMINISTIC else ""))
%bwd,fp8%print("FP8 gradient amax: " + ", ".join(f"{{n}} {{a:.4g}}" for n, a in grad_amax.items()))
%bwd%print(f"backward kernel time {{backward_kernel_us:.2f}} us, {{backward_flops / (backward_kernel_us * 1e-6) / 1e12:.1f}} TFLOPS; "
%bwd%      f"training step {{kernel_us + backward_kernel_us:.2f}} us")
result = {{"passed": passed, "max_abs_error": max_abs, "kernel_us": kernel_us}}
%fp8%result.update(amax_o=amax_o, reference_max_abs=reference_max, scale_o=float(scales["scale_o"].item()))
%bwd%result.update(output_passed=output_passed, backward_kernel_us=backward_kernel_us, step_us=kernel_us + backward_kernel_us,
%bwd%              grad_max_abs_error=grad_max_abs, grad_atol=grad_atol, grad_passed=grad_passed,
%bwd%              bitwise_repeatable=bitwise_repeatable, deterministic=DETERMINISTIC)
%bwd,fp8%result.update(grad_amax=grad_amax, grad_reference_max_abs={{n: float(g.abs().max()) for n, g in zip(("dQ", "dK", "dV"), grad_refs)}})
print("RESULT " + json.dumps(result))
sys.exit(0 if passed else 1)
'''


def _flags(config: SdpaConfig) -> dict[str, bool]:
    """What decides which lines of SCRIPT_TEMPLATE a script keeps."""
    return {
        "fp8": config.fp8,
        "o8": config.fp8 and config.o_dtype == "fp8_e4m3",  # O in E4M3: delayed scaling of scale_o
        "bwd": config.backward,
        "det": config.backward and config.deterministic,
        "scaled": config.fp8 and (config.o_dtype == "fp8_e4m3" or config.backward),  # delayed scaling is used
        # sdpa_fp8_backward has no keyword for these (the frontend would drop them without a word)
        "refuse": config.fp8 and config.backward and (config.alibi or config.bias != "none"),
    }


def _select_lines(template: str, flags: dict[str, bool]) -> str:
    """Keep the lines a configuration needs. A line may start with %cond,cond% (every one must
    hold; !cond negates); the tag is removed from the lines kept. Untagged lines are always kept."""
    out = []
    for line in template.splitlines(keepends=True):
        if line.startswith("%"):
            tag, _, rest = line[1:].partition("%")
            conds = [c.strip() for c in tag.split(",")]
            if not all(flags[c[1:]] is False if c.startswith("!") else flags[c] for c in conds):
                continue
            line = rest
        out.append(line)
    return "".join(out)


_TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn"}
_CUDNN_DTYPES = {"fp16": "HALF", "bf16": "BFLOAT16", "fp8_e4m3": "FP8_E4M3"}


def _doc_extra(config: SdpaConfig) -> str:
    """The docstring's paragraphs on FP8 and the backward, for the configs that have them."""
    paragraphs = []
    if config.fp8:
        outputs = (["O"] if config.o_dtype == "fp8_e4m3" else []) + (
            ["dQ, dK, dV, dP"] if config.backward else []
        )
        text = (
            f"FP8 (E4M3): q, k, v{', dO' if config.backward else ''} are scaled per tensor by 448/amax before rounding, "
            "and the graph reads their descales. "
        )
        if outputs:
            text += f"{', '.join(outputs)} get delayed scaling: one execution with scale 1, then 448/amax of what it wrote. "
        paragraphs.append(text + "The reference computes on the dequantised inputs.")
    if config.backward:
        op = "sdpa_fp8_backward" if config.fp8 else "sdpa_backward"
        paragraphs.append(
            f"Training step: the forward also writes the softmax stats; the backward ({op}) turns o, the stats and a "
            "random output gradient dO into dQ, dK, dV, checked against fp32 autograd on the same logical tensors and "
            "the same dO, and timed the same way."
            + (" It asks for the deterministic algorithm." if config.deterministic else "")
        )
    return "".join(textwrap.fill(p, width=100) + "\n" for p in paragraphs)


def script(config: SdpaConfig, seed: int = 0) -> str:
    """A standalone Python file that reproduces `config` with cudnn and torch only: the forward
    (sdpa, or sdpa_fp8 with per-tensor scales), and with `config.backward` the training step's
    backward (sdpa_backward or sdpa_fp8_backward), each checked and timed."""
    atol, rtol = TOLERANCES[config.dtype]
    grad_atol, grad_rtol = GRAD_TOLERANCES[config.dtype]
    fp8 = config.fp8
    io16 = "bf16" if config.o_dtype == "bf16" else "fp16"  # the graph's io type next to FP8 tensors
    text = _select_lines(SCRIPT_TEMPLATE, _flags(config))
    return text.format(
        label=config.label(),
        tool_version=tool_version(),
        doc_extra=_doc_extra(config),
        and_gradients=" and the gradients are" if config.backward else " is",
        grads_too=" (and dQ, dK, dV)" if config.backward else "",
        b=config.b,
        h_q=config.h_q,
        h_kv=config.h_kv,
        s_q=config.s_q,
        s_kv=config.s_kv,
        d_qk=config.d_qk,
        d_v=config.d_v,
        torch_dtype=_TORCH_DTYPES[config.dtype],
        cudnn_dtype=_CUDNN_DTYPES[config.dtype],
        torch_o_dtype=_TORCH_DTYPES[config.o_dtype],
        cudnn_o_dtype=_CUDNN_DTYPES[config.o_dtype],
        graph_io_type=f"cudnn.data_type.{_CUDNN_DTYPES[io16]}" if fp8 else "IO_TYPE",
        graph_io_comment="  # the 16-bit type; every FP8 tensor declares its own" if fp8 else "",
        bias_dtype=f"torch.{_TORCH_DTYPES[io16]}" if fp8 else "DTYPE",
        bias_type=f"cudnn.data_type.{_CUDNN_DTYPES[io16]}" if fp8 else "IO_TYPE",
        do_type="IO_TYPE" if fp8 else "O_TYPE",
        layout=config.layout,
        order=LAYOUTS[config.layout],
        scale=config.scale,
        causal=config.causal,
        window=config.window,
        window_keyword="left_bound" if fp8 else "diagonal_band_left_bound",
        seq_lens_q=list(config.seq_lens_q) if config.seq_lens_q else None,
        seq_lens_kv=list(config.seq_lens_kv) if config.seq_lens_kv else None,
        alibi=config.alibi,
        bias_dims=bias_dims(config) if config.bias != "none" else None,
        implementation=None if config.implementation == "auto" else config.implementation.upper(),
        dropout=config.dropout,
        dropout_seed=config.dropout_seed,
        heuristics=", ".join(f"cudnn.heur_mode.{m}" for m in config.heuristics),
        atol=atol,
        rtol=rtol,
        grad_atol=grad_atol,
        grad_rtol=grad_rtol,
        deterministic=config.deterministic,
        training=config.backward,
        seed=seed,
        flops=config.flops(),
        backward_flops=config.backward_flops(),
    )
