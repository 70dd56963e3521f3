"""Take a result away: a standalone reproduction script, the RunResult as JSON, the plans as CSV.

The script uses only `cudnn` and `torch`, builds the same graph (same layout strides, same
options), checks it against fp32 math on the same logical tensors (no permute) and prints
the kernel time measured the way the engine measures it. Its last line is
`RESULT {json}` so a program can compare its figures with the engine's.
"""

from __future__ import annotations

import csv
import io
from importlib.metadata import PackageNotFoundError, version

from .engine.config import SdpaConfig
from .engine.graph import bias_dims
from .engine.layouts import LAYOUTS
from .engine.reference import TOLERANCES
from .engine.results import SCHEMA_VERSION, RunResult

EXPORT_KINDS = {"script": ".py", "json": ".json", "csv": ".csv"}


def tool_version() -> str:
    try:
        return version("cudnn-sdpa-explorer")
    except PackageNotFoundError:
        return "unknown"


def default_filename(config: SdpaConfig, kind: str) -> str:
    stem = "sdpa_" + config.label().replace(" ", "_").replace("/", "-")
    return stem + EXPORT_KINDS[kind]


SCRIPT_TEMPLATE = '''#!/usr/bin/env python3
"""Reproduce one cuDNN SDPA configuration: {label}

Exported by sdpa-explorer {tool_version}. Needs only the cuDNN frontend (nvidia-cudnn-frontend)
and torch with a CUDA GPU. Builds the graph, runs it, checks it against fp32 math on the same
logical (b, h, s, d) tensors (layout is only strides: nothing is permuted), and prints the
kernel time: CUPTI kernel durations while a CUDA graph of N executions is replayed.
Exit code 0 when the output is within tolerance.
"""

import json
import math
import statistics
import sys

import cudnn
import torch
from torch.profiler import ProfilerActivity, profile

B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = {b}, {h_q}, {h_kv}, {s_q}, {s_kv}, {d_qk}, {d_v}
DTYPE, IO_TYPE = torch.{torch_dtype}, cudnn.data_type.{cudnn_dtype}
LAYOUT, MEMORY_ORDER = "{layout}", {order}  # memory order of the logical dims (b, h, s, d), outermost first
ATTN_SCALE = {scale!r}
CAUSAL = "{causal}"  # none | top_left | bottom_right (bottom-right aligns the diagonal to the real lengths)
WINDOW = {window!r}  # sliding window (diagonal_band_left_bound); None: no window
SEQ_LENS_Q, SEQ_LENS_KV = {seq_lens_q!r}, {seq_lens_kv!r}  # real lengths (padding mask); None: all full
ALIBI = {alibi!r}
BIAS_DIMS = {bias_dims!r}  # additive bias (1|b, 1|h, s_q, s_kv); None: no bias
IMPLEMENTATION = {implementation!r}  # cudnn.attention_implementation name; None: AUTO
DROPOUT, DROPOUT_SEED = {dropout!r}, {dropout_seed!r}  # dropout probability (0: off) and the mask's seed
HEURISTICS = [{heuristics}]
ATOL, RTOL = {atol!r}, {rtol!r}
SEED = {seed}

q_dims, k_dims = (B, H_Q, S_Q, D_QK), (B, H_KV, S_KV, D_QK)
v_dims, o_dims = (B, H_KV, S_KV, D_V), (B, H_Q, S_Q, D_V)


def strides(dims):
    out, step = [0, 0, 0, 0], 1
    for axis in reversed(MEMORY_ORDER):
        out[axis] = step
        step *= dims[axis]
    return tuple(out)


def allocate(dims):
    """Logical dims, physical layout: allocate in memory order, view back as (b, h, s, d)."""
    physical = torch.empty([dims[a] for a in MEMORY_ORDER], dtype=DTYPE, device="cuda")
    view = physical.permute(*[MEMORY_ORDER.index(a) for a in range(4)])
    assert view.stride() == strides(dims)
    return view


gen = torch.Generator(device="cuda").manual_seed(SEED)
q, k, v = (allocate(d) for d in (q_dims, k_dims, v_dims))
for t, d in ((q, q_dims), (k, k_dims), (v, v_dims)):
    t.copy_(torch.randn(d, generator=gen, device="cuda", dtype=torch.float32))
bias = None
if BIAS_DIMS is not None:
    bias = torch.randn(BIAS_DIMS, generator=gen, device="cuda", dtype=torch.float32).to(DTYPE)
o = allocate(o_dims).fill_(float("nan"))  # an output that is never written cannot pass
lens_q = list(SEQ_LENS_Q or [S_Q] * B)
lens_kv = list(SEQ_LENS_KV or [S_KV] * B)

handle = cudnn.create_handle()
cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
def make_graph(rng_dump=None):
    """The graph, built as the seed builds it. With `rng_dump` (a tensor) it also writes the
    dropout mask it draws, to check the output; the timed graph does not dump."""
    graph = cudnn.pygraph(
        io_data_type=IO_TYPE,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    q_t = graph.tensor(name="q", dim=q_dims, stride=strides(q_dims), data_type=IO_TYPE)
    k_t = graph.tensor(name="k", dim=k_dims, stride=strides(k_dims), data_type=IO_TYPE)
    v_t = graph.tensor(name="v", dim=v_dims, stride=strides(v_dims), data_type=IO_TYPE)
    options, pack = {{}}, {{}}
    if CAUSAL == "top_left":
        options["use_causal_mask"] = True
    elif CAUSAL == "bottom_right":
        options["use_causal_mask_bottom_right"] = True
    if WINDOW:
        options["diagonal_band_left_bound"] = WINDOW
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
        bias_t = graph.tensor(name="bias", dim=tuple(bias.shape), stride=bias.stride(), data_type=IO_TYPE)
        options["bias"] = bias_t
        pack[bias_t] = bias
    if DROPOUT:
        seed_t = graph.tensor(name="seed", dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT64)
        offset_t = graph.tensor(name="offset", dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT64)
        options["dropout"] = (DROPOUT, seed_t, offset_t)
        pack.update({{seed_t: dropout_seed, offset_t: dropout_offset}})
        if rng_dump is not None:
            dump_t = graph.tensor(name="rng_dump", dim=tuple(rng_dump.shape), stride=rng_dump.stride(),
                                  data_type=cudnn.data_type.FLOAT)
            options["rng_dump"] = dump_t
            pack[dump_t] = rng_dump
    if IMPLEMENTATION:
        options["implementation"] = getattr(cudnn.attention_implementation, IMPLEMENTATION)
    o_t, _stats = graph.sdpa(name="sdpa", q=q_t, k=k_t, v=v_t, is_inference=True, attn_scale=ATTN_SCALE, **options)
    o_t.set_output(True).set_dim(o_dims).set_stride(strides(o_dims)).set_data_type(IO_TYPE)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans(HEURISTICS)
    graph.check_support()
    graph.build_plans()
    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    pack.update({{q_t: q, k_t: k, v_t: v, o_t: o}})
    return graph, pack, workspace


seq_len_q = torch.tensor(lens_q, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
seq_len_kv = torch.tensor(lens_kv, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
dropout_seed = torch.full((1, 1, 1, 1), DROPOUT_SEED, dtype=torch.int64, device="cuda")
dropout_offset = torch.zeros((1, 1, 1, 1), dtype=torch.int64, device="cuda")
dropout_mask = None
if DROPOUT:  # the mask the graph draws, dumped by the same graph built with rng_dump
    dropout_mask = torch.empty((B, H_Q, S_Q, S_KV), dtype=torch.float32, device="cuda")
    check_graph, check_pack, check_workspace = make_graph(dropout_mask)
    check_graph.execute(check_pack, check_workspace, handle=handle)
graph, pack, workspace = make_graph()
o.fill_(float("nan"))
graph.execute(pack, workspace, handle=handle)
torch.cuda.synchronize()


def alibi_slopes(h):
    n = 2 ** math.floor(math.log2(h))
    return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)] + [2.0 ** (-4.0 * i / n) for i in range(1, 2 * (h - n), 2)]


def reference():
    """softmax(q k^T * scale + bias + alibi + mask) v in fp32 on the same logical tensors,
    a row block at a time. Padded query rows are 0 and are not compared."""
    torch.backends.cuda.matmul.allow_tf32 = False
    out = torch.zeros(o_dims, dtype=torch.float32, device="cuda")
    group = H_Q // H_KV  # GQA: query head h reads kv head h // group
    rows = max(1, (256 << 20) // (S_KV * 4))
    slopes = alibi_slopes(H_Q) if ALIBI else None
    j = torch.arange(S_KV, device="cuda").unsqueeze(0)
    for bi in range(B):
        lq, lkv = lens_q[bi], lens_kv[bi]
        align = lkv - lq if CAUSAL == "bottom_right" else 0
        for h in range(H_Q):
            kf, vf = k[bi, h // group].float(), v[bi, h // group].float()
            for r0 in range(0, lq, rows):
                r1 = min(r0 + rows, lq)
                i = torch.arange(r0, r1, device="cuda").unsqueeze(1)
                scores = q[bi, h, r0:r1].float() @ kf.T * ATTN_SCALE
                if bias is not None:
                    scores += bias[bi if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0, r0:r1].float()
                if ALIBI:
                    scores += (j - i) * slopes[h]
                keep = j < lkv
                if CAUSAL != "none":
                    keep = keep & (j <= i + align)
                if WINDOW:
                    keep = keep & (j > i + align - WINDOW)
                scores.masked_fill_(~keep, float("-inf"))
                p = torch.softmax(scores, dim=-1).nan_to_num_(0.0)
                if dropout_mask is not None:
                    p = p * dropout_mask[bi, h, r0:r1] / (1.0 - DROPOUT)
                out[bi, h, r0:r1] = p @ vf
    return out


ref = reference()
real = torch.arange(S_Q, device="cuda").view(1, 1, -1, 1) < torch.tensor(lens_q, device="cuda").view(-1, 1, 1, 1)
real = real.expand(o_dims)
got, want = o.float()[real], ref[real]
err = (got - want).abs()
finite = bool(torch.isfinite(got).all())
max_abs = float(err.max())
mismatched = int((err > ATOL + RTOL * want.abs()).sum()) if finite else got.numel()
passed = finite and mismatched == 0


def kernel_time_us(replays=20, per_replay=20):
    stream = torch.cuda.Stream()
    cudnn.set_stream(handle, stream.cuda_stream)
    with torch.cuda.stream(stream):
        for _ in range(3):
            graph.execute(pack, workspace, handle=handle)
    stream.synchronize()
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
        if e.device_type == torch.autograd.DeviceType.CUDA and not (e.name or "").startswith(("Memcpy", "Memset"))
    )
    group = len(kernels) // replays
    per_exec = [sum(d for _, d in kernels[i * group:(i + 1) * group]) / per_replay for i in range(replays)]
    return statistics.median(per_exec)


kernel_us = kernel_time_us()
flops = {flops}
print(f"{label}")
print(f"cuDNN {{cudnn.backend_version()}}, frontend {{cudnn.__version__}}, torch {{torch.__version__}}, "
      f"{{torch.cuda.get_device_name()}}")
print(f"max abs error {{max_abs:.3e}} against fp32 (atol {{ATOL}}, rtol {{RTOL}}): {{'PASS' if passed else 'FAIL'}}")
print(f"kernel time {{kernel_us:.2f}} us, {{flops / (kernel_us * 1e-6) / 1e12:.1f}} TFLOPS")
print("RESULT " + json.dumps({{"passed": passed, "max_abs_error": max_abs, "kernel_us": kernel_us}}))
sys.exit(0 if passed else 1)
'''


def script(config: SdpaConfig, seed: int = 0) -> str:
    """A standalone Python file that reproduces `config` with cudnn and torch only."""
    atol, rtol = TOLERANCES[config.dtype]
    return SCRIPT_TEMPLATE.format(
        label=config.label(),
        tool_version=tool_version(),
        b=config.b, h_q=config.h_q, h_kv=config.h_kv, s_q=config.s_q, s_kv=config.s_kv,
        d_qk=config.d_qk, d_v=config.d_v,
        torch_dtype={"fp16": "float16", "bf16": "bfloat16"}[config.dtype],
        cudnn_dtype={"fp16": "HALF", "bf16": "BFLOAT16"}[config.dtype],
        layout=config.layout,
        order=LAYOUTS[config.layout],
        scale=config.scale,
        causal=config.causal,
        window=config.window,
        seq_lens_q=list(config.seq_lens_q) if config.seq_lens_q else None,
        seq_lens_kv=list(config.seq_lens_kv) if config.seq_lens_kv else None,
        alibi=config.alibi,
        bias_dims=bias_dims(config) if config.bias != "none" else None,
        implementation=None if config.implementation == "auto" else config.implementation.upper(),
        dropout=config.dropout,
        dropout_seed=config.dropout_seed,
        heuristics=", ".join(f"cudnn.heur_mode.{m}" for m in config.heuristics),
        atol=atol, rtol=rtol,
        seed=seed,
        flops=config.flops(),
    )


PLAN_COLUMNS = (
    "config", "dtype", "layout", "pass", "plan_index", "plan_name", "engine_id", "knobs", "workspace_bytes", "built",
    "build_error", "build_seconds", "kernel_median_us", "kernel_p10_us", "kernel_p90_us", "l2_flushed", "tflops",
    "max_abs_error", "matches", "heuristic_pick", "fastest",
)
ENV_COLUMNS = (
    "gpu_name", "compute_capability", "driver_version", "cuda_runtime", "torch_version", "cudnn_backend_version",
    "torch_cudnn_version", "frontend_version",
)


def plans_csv(result: RunResult) -> str:
    """The plans table, one row a plan (the forward's, then the backward's), with the environment
    on every row so that runs from two machines can be concatenated and compared."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow((*PLAN_COLUMNS, *ENV_COLUMNS, "schema_version"))
    env = result.environment
    env_values = [getattr(env, c, "") if env else "" for c in ENV_COLUMNS]
    passes = [("forward", p) for p in result.plans]
    if result.backward is not None:
        passes += [("backward", p) for p in result.backward.plans]
    for kind, p in passes:
        t = p.timing
        writer.writerow((
            result.config.label(), result.config.dtype, result.config.layout, kind, p.index, p.name,
            "" if p.engine_id is None else p.engine_id, ";".join(f"{k}={v}" for k, v in p.knobs.items()),
            "" if p.workspace_bytes is None else p.workspace_bytes, p.built, p.build_error,
            "" if p.build_seconds is None else f"{p.build_seconds:.6f}",
            f"{t.median_us:.3f}" if t else "", f"{t.p10_us:.3f}" if t else "", f"{t.p90_us:.3f}" if t else "",
            t.l2_flushed if t else "", f"{p.tflops:.2f}" if p.tflops else "",
            "" if p.max_abs_error is None else f"{p.max_abs_error:.6e}", "" if p.matches is None else p.matches,
            p.is_heuristic_pick, p.is_fastest, *env_values, SCHEMA_VERSION,
        ))
    return buf.getvalue()


def render(kind: str, result: RunResult, seed: int = 0) -> str:
    """The text of one export kind for a result (the script needs only its configuration)."""
    if kind == "script":
        return script(result.config, seed)
    if kind == "json":
        return result.to_json()
    if kind == "csv":
        return plans_csv(result)
    raise ValueError(f"unknown export {kind!r} (use {', '.join(EXPORT_KINDS)})")
