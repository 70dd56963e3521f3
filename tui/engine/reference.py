"""The fp32 reference and the error metrics that decide pass or fail.

The reference runs on the SAME logical (b, h, s, d) tensors the graph read: layout is
only strides, so nothing is ever permuted (the seed's check permuted logical dims and
compared attention over heads). GQA is expanded and the causal mask applied explicitly,
so the check does not trust any attention kernel, torch's included.
"""

from __future__ import annotations

import contextlib
from typing import Any

from .config import REFERENCE_CHUNK_BYTES, SdpaConfig
from .layouts import allocate
from .results import ErrorMetrics

# (atol, rtol). fp16 is the seed's; bf16 has 8 mantissa bits against fp16's 11, so its
# rounding of O alone is ~8x larger: we allow 4x the absolute and torch's bf16 rtol.
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp16": (5e-3, 3e-3),
    "bf16": (2e-2, 1.6e-2),
}

REFERENCE_NAME = "fp32 math on the same logical tensors (explicit mask, GQA expanded, TF32 off)"


def torch_dtype(torch: Any, dtype: str) -> Any:
    return {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]


def make_inputs(config: SdpaConfig, device: str, seed: int = 0) -> tuple[Any, Any, Any]:
    """Random q, k, v in the config's dtype, stored in its layout (logical dims b, h, s, d)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    dt = torch_dtype(torch, config.dtype)
    out = []
    for dims in (config.q_dims, config.k_dims, config.v_dims):
        t = allocate(torch, dims, config.layout, dt, device)
        t.copy_(torch.randn(dims, generator=gen, device=device, dtype=torch.float32))
        out.append(t)
    return out[0], out[1], out[2]


def keep_mask(config: SdpaConfig, rows: range, device: Any) -> Any:
    """Boolean (len(rows), s_kv): True where query i may attend key j; None when nothing is masked."""
    import torch

    off = config.causal_offset
    if off is None:
        return None
    i = torch.arange(rows.start, rows.stop, device=device).unsqueeze(1)
    j = torch.arange(config.s_kv, device=device).unsqueeze(0)
    return j <= i + off


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


def _chunks(config: SdpaConfig) -> tuple[int, int]:
    """(heads, rows) per step so one step's fp32 scores stay under REFERENCE_CHUNK_BYTES."""
    row_bytes = config.s_kv * 4
    per_head = config.s_q * row_bytes
    if per_head * config.h_q <= REFERENCE_CHUNK_BYTES:
        return config.h_q, config.s_q
    if per_head <= REFERENCE_CHUNK_BYTES:
        return max(1, REFERENCE_CHUNK_BYTES // per_head), config.s_q
    return 1, max(1, REFERENCE_CHUNK_BYTES // row_bytes)


def reference_fp32(config: SdpaConfig, q: Any, k: Any, v: Any) -> Any:
    """softmax(q k^T * scale + mask) v in fp32, as a contiguous (b, h_q, s_q, d_v) tensor.

    A query row with no kept key outputs 0 (the convention cuDNN follows for padding)."""
    import torch

    group = config.h_q // config.h_kv
    out = torch.empty(config.o_dims, dtype=torch.float32, device=q.device)
    heads_step, rows_step = _chunks(config)
    with _full_fp32(), torch.no_grad():
        for bi in range(config.b):
            for h0 in range(0, config.h_q, heads_step):
                h1 = min(h0 + heads_step, config.h_q)
                kv_heads = torch.arange(h0, h1, device=q.device) // group  # GQA: query head -> kv head
                kf = k[bi].index_select(0, kv_heads).float()
                vf = v[bi].index_select(0, kv_heads).float()
                for r0 in range(0, config.s_q, rows_step):
                    r1 = min(r0 + rows_step, config.s_q)
                    qf = q[bi, h0:h1, r0:r1].float()
                    scores = torch.matmul(qf, kf.transpose(-1, -2)) * config.scale
                    keep = keep_mask(config, range(r0, r1), q.device)
                    if keep is not None:
                        scores.masked_fill_(~keep, float("-inf"))
                    p = torch.softmax(scores, dim=-1).nan_to_num_(0.0)  # all-masked row -> 0
                    out[bi, h0:h1, r0:r1] = torch.matmul(p, vf)
    return out


def torch_sdpa(config: SdpaConfig, q: Any, k: Any, v: Any) -> Any:
    """torch's own low-precision SDPA on the same tensors: the peer cuDNN is compared with."""
    import torch
    import torch.nn.functional as F

    kwargs: dict[str, Any] = {"scale": config.scale}
    if config.h_q != config.h_kv:
        kwargs["enable_gqa"] = True
    if config.causal == "top_left" or (config.causal == "bottom_right" and config.s_q == config.s_kv):
        kwargs["is_causal"] = True
    elif config.causal == "bottom_right":
        kwargs["attn_mask"] = keep_mask(config, range(config.s_q), q.device)
    with torch.no_grad():
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


def compare(out: Any, ref: Any, atol: float, rtol: float) -> ErrorMetrics:
    """Error of `out` against `ref` (same logical shape). Mismatch uses torch.testing's rule:
    |out - ref| > atol + rtol * |ref|. Relative error is over elements with |ref| >= atol,
    where it means something."""
    import torch

    with torch.no_grad():
        o = out.float()
        finite = torch.isfinite(o)
        nonfinite = int((~finite).sum().item())
        err = (o - ref).abs()
        err = torch.where(finite, err, torch.full_like(err, float("inf")))
        aref = ref.abs()
        significant = aref >= atol
        rel = torch.where(significant, err / aref.clamp_min(atol), torch.zeros_like(err))
        mismatched = int((err > atol + rtol * aref).sum().item())
        finite_err = torch.where(finite, err, torch.zeros_like(err))
        return ErrorMetrics(
            max_abs=float(err.max().item()) if err.numel() else 0.0,
            max_rel=float(rel.max().item()) if rel.numel() else 0.0,
            mean_abs=float(finite_err.mean().item()) if err.numel() else 0.0,
            mismatched=mismatched,
            total=int(err.numel()),
            nonfinite=nonfinite,
        )
