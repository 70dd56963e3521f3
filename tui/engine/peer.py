"""The peer: torch's own SDPA forced to one of its backends other than cuDNN, the first of
FLASH, EFFICIENT and MATH that runs the configuration (torch_sdpa and torch_sdpa_grads, here,
run it under one backend). Left to choose, torch 2.11 on the H200 runs cuDNN's own kernel, whose
error is cuDNN's to the bit (DESIGN fact 12): no context for cuDNN's figures."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig
from .cancel import between_chunks
from .reference import additive_terms, block_steps, chunk_steps, vjp

# Tried in this order; the first that runs the configuration is the peer. Never cuDNN.
PEER_BACKENDS: tuple[str, ...] = ("FLASH", "EFFICIENT", "MATH")
# a score's cost to torch's CPU kernels against the fp32 reference (a quarter or less): the CPU
# peer's chunks are 4 times larger than the reference's
PEER_WORK = 0.25
SDP_BACKENDS = {"FLASH": "FLASH_ATTENTION", "EFFICIENT": "EFFICIENT_ATTENTION", "MATH": "MATH"}  # no CUDNN


@dataclass(frozen=True)
class PeerRun:
    """What the peer gave: the backend that ran (FLASH, EFFICIENT or MATH; '' where none did),
    its outputs (None where none ran), and (backend, torch's reason) for each that refused first."""

    backend: str
    outputs: Any = None
    refused: tuple[tuple[str, str], ...] = ()


def forced(backend: str | None) -> Any:
    """A context in which torch's SDPA may use `backend` only (None: torch's own choice)."""
    if backend is None:
        return contextlib.nullcontext()
    if backend not in SDP_BACKENDS:
        raise ValueError(f"not a peer backend: {backend!r} (the peer is never cuDNN)")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, SDP_BACKENDS[backend]))


def first_backend(run: Callable[[str], Any], backends: tuple[str, ...] | None = None) -> PeerRun:
    """`run(backend)`, which forces that backend (torch_sdpa, torch_sdpa_grads), for each of
    `backends` (PEER_BACKENDS) in turn until one runs. A backend that cannot run the configuration
    raises a RuntimeError ("No available kernel...", after UserWarnings saying why): that is a
    refusal, and the next is tried. The warnings are kept as the reason, not shown. Running out of
    memory and CUDA errors are no refusal: they propagate."""
    import torch

    refused: list[tuple[str, str]] = []
    for backend in PEER_BACKENDS if backends is None else backends:
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            try:
                outputs = run(backend)
            except torch.cuda.OutOfMemoryError:
                raise
            except RuntimeError as exc:
                if "CUDA error" in str(exc):
                    raise
                refused.append((backend, refusal_reason([str(w.message) for w in heard], exc)))
                continue
        return PeerRun(backend, outputs, tuple(refused))
    return PeerRun("", None, tuple(refused))


# What each backend is, in a few words, by device where it differs.
BACKEND_WORDS = {
    ("FLASH", "cuda"): "FlashAttention-2",
    ("FLASH", "cpu"): "ATen's flash-attention kernel for the CPU",
    ("EFFICIENT", "cuda"): "the memory-efficient kernel from xFormers",
    ("EFFICIENT", "cpu"): "the memory-efficient kernel",
    ("MATH", "cuda"): "ATen's unfused matmul, softmax and matmul",
    ("MATH", "cpu"): "ATen's unfused matmul, softmax and matmul",
}


def peer_name(config: SdpaConfig, backend: str) -> str:
    """A peer's name: torch, the backend that ran, and the inputs' precision (fp16 for FP8 inputs),
    e.g. "torch FLASH bf16"."""
    return f"torch {backend} {'fp16' if config.fp8 else config.dtype}"


def described(what: str, config: SdpaConfig, run: PeerRun, device: str) -> str:
    """One line: what the peer runs (`what`: torch SDPA, or its backward) forced to the backend that
    ran and why it is not cuDNN, the GQA and FP8 arrangements, and why each backend tried before it
    refused, in torch's words."""
    words = [f"{what} forced to its {run.backend} backend ({BACKEND_WORDS[run.backend, device]})"]
    if config.h_q != config.h_kv:
        words.append(f"K and V repeated to the {config.h_q} query heads")
    if config.fp8:
        words.append("in fp16 on the dequantised inputs (torch has no FP8 attention)")
    refused = [f"; {backend} refused: {reason}" for backend, reason in run.refused]
    return ", ".join(words) + "".join(refused) + "; never cuDNN, which is what is measured"


def refusal_reason(heard: list[str], exc: Exception) -> str:
    """torch's reason for refusing, in a few words: the first warning that gives one (not a heading
    such as "Flash attention kernel not used because:", nor the other backends being disabled,
    which torch also says on CUDA), else the error's first sentence."""
    said = [m.split(" (Triggered internally", 1)[0].strip() for m in heard]
    reasons = [m for m in said if m and not m.endswith(":") and not re.search("disabled|cuBLAS", m)]
    text = reasons[0] if reasons else str(exc).strip()
    return text.split(". ", 1)[0].split("\n", 1)[0].rstrip(".")


def expand_kv(config: SdpaConfig, k: Any, v: Any) -> tuple[Any, Any]:
    """GQA's K and V repeated to the h_q query heads (query head i reads kv head i // group), so
    every backend computes GQA as plain multi-head attention: the same arithmetic per head (each
    head's softmax(q k^T) v does not depend on the others). Chosen over torch's enable_gqa, which
    not every backend takes (EFFICIENT refuses GQA, DESIGN fact 13; torch before 2.5 has no
    enable_gqa), so that which backend is the peer depends on the shape and the mask, not on GQA
    support: FLASH and EFFICIENT stay in reach. The cost is K and V times the group in memory, on the
    GPU (the CPU's chunks read one kv head expanded, without a copy: cpu_chunks)."""
    group = config.h_q // config.h_kv
    if group == 1:
        return k, v
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def _whole_call(config: SdpaConfig, bias: Any, backend: str | None) -> bool | None:
    """is_causal of one call over whole sequences, or None where the mask goes explicitly, a block
    of rows at a time: masks other than a plain causal one, and MATH, which holds every score."""
    if (
        backend == "MATH"
        or config.window
        or config.varlen
        or config.alibi
        or bias is not None
        or config.variant != "none"
    ):
        return None
    if config.causal == "none" or (config.causal == "bottom_right" and config.s_q == 1):
        return False  # one query at the bottom right sees every key: a decode step masks nothing
    return True if config.causal == "top_left" or config.s_q == config.s_kv else None


def _mask(config: SdpaConfig, bi: int, rows: range, bias: Any, like: Any, heads: range | None = None) -> Any:
    """The explicit additive mask of one block, (1, heads or 1, rows, s_kv) in the inputs' dtype
    (heads: all by default)."""
    term = additive_terms(config, bi, heads or range(0, config.h_q), rows, bias, like.device)
    return None if term is None else term.to(like.dtype).unsqueeze(0)


def cpu_chunks(config: SdpaConfig, bias: Any, backend: str | None, work: float = PEER_WORK) -> Any:
    """The CPU peer's chunks, (batch entry, query heads, rows, is_causal or None for an explicit
    mask), a check for a cancel before each: reference.chunk_steps's, the heads of one kv head at
    most (its K and V expanded to them, never copied). Rows apart, a plain causal mask goes
    explicitly. On the CPU torch computes each head alike, and each row alike in chunks of 4 rows
    or more, with either mask, so the forward's outputs are the bits of one call (torch 2.15:
    tests/test_cpu_chunks.py); a backward's dK and dV are sums over the chunks. Not on the GPU:
    there torch splits a call's keys by its batch and heads."""
    group = config.h_q // config.h_kv
    causal = _whole_call(config, bias, backend)
    heads_step, rows_step = chunk_steps(config, "cpu", work)
    heads_step = min(heads_step, group) if group > 1 else heads_step
    if causal and rows_step < config.s_q:
        causal = None
    for bi in range(config.b):
        for h0 in range(0, config.h_q, heads_step):
            heads = range(h0, min(h0 + heads_step, config.h_q))
            for r0 in range(0, config.s_q, rows_step):
                between_chunks()
                yield bi, heads, range(r0, min(r0 + rows_step, config.s_q)), causal


def _kv_view(config: SdpaConfig, t: Any, bi: int, heads: range) -> Any:
    """K or V of batch entry `bi` as the query heads `heads` (of one kv head under GQA) read it,
    never copied: (1, len(heads), s_kv, d)."""
    group = config.h_q // config.h_kv
    if group == 1:
        return t[bi : bi + 1, heads.start : heads.stop]
    kv = heads.start // group
    return t[bi : bi + 1, kv : kv + 1].expand(1, len(heads), *t.shape[2:])


def _cpu_sdpa(config: SdpaConfig, q: Any, k: Any, v: Any, bias: Any, backend: str | None) -> Any:
    """torch_sdpa on the CPU, in chunks (cpu_chunks)."""
    import torch
    import torch.nn.functional as F

    out = torch.empty(config.o_dims, dtype=q.dtype, device=q.device)
    with torch.no_grad(), forced(backend):
        for bi, heads, rows, causal in cpu_chunks(config, bias, backend):
            hs, rs = slice(heads.start, heads.stop), slice(rows.start, rows.stop)
            kb, vb = (_kv_view(config, t, bi, heads) for t in (k, v))
            if causal is not None:
                o = F.scaled_dot_product_attention(
                    q[bi : bi + 1, hs, rs], kb, vb, is_causal=causal, scale=config.scale
                )
            else:
                mask = _mask(config, bi, rows, bias, q, heads)
                o = F.scaled_dot_product_attention(
                    q[bi : bi + 1, hs, rs], kb, vb, attn_mask=mask, scale=config.scale
                ).nan_to_num(0.0)
            out[bi : bi + 1, hs, rs] = o
    return out


def _cpu_sdpa_grads(
    config: SdpaConfig, q: Any, k: Any, v: Any, d_o: Any, bias: Any, backend: str | None
) -> tuple[Any, Any, Any]:
    """torch_sdpa_grads on the CPU, in chunks (cpu_chunks); the gradients of a shared kv head
    are its query heads' low-precision gradients summed in fp32."""
    import torch
    import torch.nn.functional as F

    group = config.h_q // config.h_kv
    dq = torch.zeros(config.q_dims, dtype=torch.float32, device=q.device)
    dk = torch.zeros(config.k_dims, dtype=torch.float32, device=q.device)
    dv = torch.zeros(config.v_dims, dtype=torch.float32, device=q.device)
    with forced(backend):
        for bi, heads, rows, causal in cpu_chunks(config, bias, backend, work=PEER_WORK * 3.5):
            hs, rs = slice(heads.start, heads.stop), slice(rows.start, rows.stop)
            qb = q[bi : bi + 1, hs, rs].detach().requires_grad_()
            kb, vb = (_kv_view(config, t, bi, heads).detach().requires_grad_() for t in (k, v))
            if causal is not None:
                o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=config.scale)
            else:
                mask = _mask(config, bi, rows, bias, q, heads)
                o = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=config.scale)
            gq, gk, gv = vjp(torch, o, (qb, kb, vb), d_o[bi : bi + 1, hs, rs])
            kvs = slice(heads.start // group, (heads.stop - 1) // group + 1)
            shared = min(group, len(heads))  # the query heads of one kv head in the chunk
            dq[bi, hs, rs] = gq[0].float()
            dk[bi, kvs] += gk[0].float().unflatten(0, (-1, shared)).sum(1)
            dv[bi, kvs] += gv[0].float().unflatten(0, (-1, shared)).sum(1)
    return dq, dk, dv


def torch_sdpa(
    config: SdpaConfig, q: Any, k: Any, v: Any, bias: Any = None, backend: str | None = None
) -> Any:
    """torch's own low-precision SDPA on the same tensors, forced to `backend` (FLASH, EFFICIENT or
    MATH; None: torch's own choice, which on the H200 is cuDNN): the peer's forward. Plain causal
    masks go as is_causal; anything else as an explicit additive mask, a block of query rows at a
    time so the mask never has to exist whole. GQA's K and V are repeated first (expand_kv). On
    the CPU it goes in chunks, a check for a cancel between them, K and V never repeated
    (cpu_chunks: the same outputs)."""
    import torch
    import torch.nn.functional as F

    if q.device.type == "cpu":
        return _cpu_sdpa(config, q, k, v, bias, backend)
    k, v = expand_kv(config, k, v)
    causal = _whole_call(config, bias, backend)
    with torch.no_grad(), forced(backend):
        if causal is not None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=config.scale)
        out = torch.empty(config.o_dims, dtype=q.dtype, device=q.device)
        _, rows_step = block_steps(config)
        for bi in range(config.b):
            for r0 in range(0, config.s_q, rows_step):
                rows = range(r0, min(r0 + rows_step, config.s_q))
                o = F.scaled_dot_product_attention(
                    q[bi : bi + 1, :, rows.start : rows.stop],
                    k[bi : bi + 1],
                    v[bi : bi + 1],
                    attn_mask=_mask(config, bi, rows, bias, q),
                    scale=config.scale,
                )
                out[bi : bi + 1, :, rows.start : rows.stop] = o.nan_to_num(0.0)
        return out


def torch_sdpa_grads(
    config: SdpaConfig, q: Any, k: Any, v: Any, d_o: Any, bias: Any = None, backend: str | None = None
) -> tuple[Any, Any, Any]:
    """torch's own low-precision SDPA backward on the same tensors, forced to `backend` as
    torch_sdpa is: dQ, dK, dV in fp32, one batch entry (and block of query rows) at a time. GQA's K
    and V are repeated to h_q heads (expand_kv); the gradients of a shared kv head are its query
    heads' low-precision gradients summed in fp32. Not with padding: torch's fully masked rows give
    NaN gradients rather than the zeros cuDNN's lengths mean. On the CPU in chunks (cpu_chunks)."""
    import torch
    import torch.nn.functional as F

    if config.varlen:
        raise ValueError("torch's SDPA backward gives NaN on fully masked rows: no peer with padding")
    if q.device.type == "cpu":
        return _cpu_sdpa_grads(config, q, k, v, d_o, bias, backend)
    k, v = expand_kv(config, k, v)
    group = config.h_q // config.h_kv
    causal = _whole_call(config, bias, backend)
    dq = torch.zeros(config.q_dims, dtype=torch.float32, device=q.device)
    dk = torch.zeros(config.k_dims, dtype=torch.float32, device=q.device)
    dv = torch.zeros(config.v_dims, dtype=torch.float32, device=q.device)
    _, rows_step = block_steps(config)
    with forced(backend):
        for bi in range(config.b):
            kb, vb = k[bi : bi + 1].detach().requires_grad_(), v[bi : bi + 1].detach().requires_grad_()
            for r0 in range(0, config.s_q, rows_step):
                rows = range(r0, min(r0 + rows_step, config.s_q))
                qb = q[bi : bi + 1, :, rows.start : rows.stop].detach().requires_grad_()
                if causal is not None and len(rows) == config.s_q:
                    o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=config.scale)
                else:
                    mask = _mask(config, bi, rows, bias, q)
                    o = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=config.scale)
                with (
                    warnings.catch_warnings()
                ):  # autograd's worker thread starts without a current CUDA context
                    warnings.filterwarnings("ignore", message="Attempting to run cuBLAS")
                    gq, gk, gv = vjp(torch, o, (qb, kb, vb), d_o[bi : bi + 1, :, rows.start : rows.stop])
                dq[bi, :, rows.start : rows.stop] = gq[0].float()
                dk[bi] += gk[0].float().unflatten(0, (config.h_kv, group)).sum(1)
                dv[bi] += gv[0].float().unflatten(0, (config.h_kv, group)).sum(1)
    return dq, dk, dv
