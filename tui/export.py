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


_CAUSAL_KWARGS = {
    "none": "",
    "top_left": "\n    use_causal_mask=True,",
    "bottom_right": "\n    use_causal_mask_bottom_right=True,",
}
_CAUSAL_OFFSET = {"none": "None", "top_left": "0", "bottom_right": "S_KV - S_Q"}

SCRIPT_TEMPLATE = '''#!/usr/bin/env python3
"""Reproduce one cuDNN SDPA configuration: {label}

Exported by sdpa-explorer {tool_version}. Needs only the cuDNN frontend (nvidia-cudnn-frontend)
and torch with a CUDA GPU. Builds the graph, runs it, checks it against fp32 math on the same
logical (b, h, s, d) tensors (layout is only strides: nothing is permuted), and prints the
kernel time: CUPTI kernel durations while a CUDA graph of N executions is replayed.
Exit code 0 when the output is within tolerance.
"""

import json
import statistics
import sys

import cudnn
import torch
from torch.profiler import ProfilerActivity, profile

B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = {b}, {h_q}, {h_kv}, {s_q}, {s_kv}, {d_qk}, {d_v}
DTYPE, IO_TYPE = torch.{torch_dtype}, cudnn.data_type.{cudnn_dtype}
LAYOUT, MEMORY_ORDER = "{layout}", {order}  # memory order of the logical dims (b, h, s, d), outermost first
ATTN_SCALE = {scale!r}
CAUSAL_OFFSET = {causal_offset}  # query i keeps keys j <= i + offset; None: no mask
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
o = allocate(o_dims).fill_(float("nan"))  # an output that is never written cannot pass

handle = cudnn.create_handle()
cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
graph = cudnn.pygraph(
    io_data_type=IO_TYPE,
    intermediate_data_type=cudnn.data_type.FLOAT,
    compute_data_type=cudnn.data_type.FLOAT,
    handle=handle,
)
q_t = graph.tensor(name="q", dim=q_dims, stride=strides(q_dims), data_type=IO_TYPE)
k_t = graph.tensor(name="k", dim=k_dims, stride=strides(k_dims), data_type=IO_TYPE)
v_t = graph.tensor(name="v", dim=v_dims, stride=strides(v_dims), data_type=IO_TYPE)
o_t, _stats = graph.sdpa(
    name="sdpa",
    q=q_t,
    k=k_t,
    v=v_t,
    is_inference=True,
    attn_scale=ATTN_SCALE,{causal_kwargs}
)
o_t.set_output(True).set_dim(o_dims).set_stride(strides(o_dims)).set_data_type(IO_TYPE)

graph.validate()
graph.build_operation_graph()
graph.create_execution_plans(HEURISTICS)
graph.check_support()
graph.build_plans()
workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
pack = {{q_t: q, k_t: k, v_t: v, o_t: o}}
graph.execute(pack, workspace, handle=handle)
torch.cuda.synchronize()


def reference():
    """softmax(q k^T * scale + mask) v in fp32 on the same logical tensors, a row block at a time."""
    torch.backends.cuda.matmul.allow_tf32 = False
    out = torch.empty(o_dims, dtype=torch.float32, device="cuda")
    group = H_Q // H_KV  # GQA: query head h reads kv head h // group
    rows = max(1, (256 << 20) // (S_KV * 4))
    for bi in range(B):
        for h in range(H_Q):
            kf, vf = k[bi, h // group].float(), v[bi, h // group].float()
            for r0 in range(0, S_Q, rows):
                r1 = min(r0 + rows, S_Q)
                scores = q[bi, h, r0:r1].float() @ kf.T * ATTN_SCALE
                if CAUSAL_OFFSET is not None:
                    i = torch.arange(r0, r1, device="cuda").unsqueeze(1)
                    j = torch.arange(S_KV, device="cuda").unsqueeze(0)
                    scores.masked_fill_(j > i + CAUSAL_OFFSET, float("-inf"))
                out[bi, h, r0:r1] = torch.softmax(scores, dim=-1).nan_to_num_(0.0) @ vf
    return out


ref = reference()
err = (o.float() - ref).abs()
finite = bool(torch.isfinite(o).all())
max_abs = float(err.max())
mismatched = int((err > ATOL + RTOL * ref.abs()).sum()) if finite else o.numel()
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
        causal_offset=_CAUSAL_OFFSET[config.causal],
        causal_kwargs=_CAUSAL_KWARGS[config.causal],
        heuristics=", ".join(f"cudnn.heur_mode.{m}" for m in config.heuristics),
        atol=atol, rtol=rtol,
        seed=seed,
        flops=config.flops(),
    )


PLAN_COLUMNS = (
    "config", "dtype", "layout", "plan_index", "plan_name", "engine_id", "knobs", "workspace_bytes", "built",
    "build_error", "build_seconds", "kernel_median_us", "kernel_p10_us", "kernel_p90_us", "l2_flushed", "tflops",
    "max_abs_error", "matches", "heuristic_pick", "fastest",
)
ENV_COLUMNS = (
    "gpu_name", "compute_capability", "driver_version", "cuda_runtime", "torch_version", "cudnn_backend_version",
    "torch_cudnn_version", "frontend_version",
)


def plans_csv(result: RunResult) -> str:
    """The plans table, one row a plan, with the environment on every row so that runs from
    two machines can be concatenated and compared."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow((*PLAN_COLUMNS, *ENV_COLUMNS, "schema_version"))
    env = result.environment
    env_values = [getattr(env, c, "") if env else "" for c in ENV_COLUMNS]
    for p in result.plans:
        t = p.timing
        writer.writerow((
            result.config.label(), result.config.dtype, result.config.layout, p.index, p.name,
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
