"""The field: other ways to compute the same attention, each run on the same logical tensors,
timed like a cuDNN plan and checked against the same fp32 reference (peer_runs.py measures them).

torch's SDPA forced to one backend at a time (FLASH, EFFICIENT, CUDNN: cuDNN's own kernel, worth
timing for torch's overhead around it, and MATH), FlexAttention (compiled; its compile time is
kept apart from its kernel time), and, where importable, FlashAttention-3 and FlashInfer (neither
is a dependency; their adapters are tested against fake modules only). Each adapter turns a
configuration into one callable that returns O as (b, h_q, s_q, d_v), or says in one line why it
cannot run it. Masks and GQA are each peer's own way: torch's enable_gqa and is_causal, an explicit
additive mask only where nothing else says it, Flex's mask_mod and score_mod.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig
from ..model.options import PEER_KEYS
from .peer import SDP_BACKENDS, forced
from .reference import additive_terms, alibi_slopes

MASK_LIMIT_BYTES = 2 << 30  # an explicit mask larger than this is not built: the peer says so


class Refused(Exception):
    """A peer cannot run this configuration; the message says why, in one line."""


@dataclass(frozen=True)
class Prepared:
    """A peer ready to run: one forward call, what it is, and what preparing it cost (Flex's
    compile time, kept apart from its kernel time)."""

    run: Callable[[], Any]
    description: str
    compile_seconds: float | None = None
    uncapturable: str = ""  # why a CUDA graph cannot hold it ('' : it can)


@dataclass(frozen=True)
class Tensors:
    """What every peer computes from: q, k, v as (b, h, s, d) in the peer's precision (fp16 on
    FP8's dequantised values), and the bias (None: none)."""

    q: Any
    k: Any
    v: Any
    bias: Any = None


def precision(config: SdpaConfig) -> str:
    """The peers' precision: torch has no FP8 attention, so FP8 runs in fp16 on the same values."""
    return "fp16" if config.fp8 else config.dtype


def _always(config: SdpaConfig) -> str:
    """What no peer here can do: dropout draws its own mask (cuDNN's cannot be applied), and no
    peer's softmax takes a sink logit."""
    if config.dropout:
        return "dropout: a peer would draw its own mask, so its output cannot be compared"
    if config.sink:
        return "sink tokens: no peer here adds a sink logit to its softmax"
    return ""


def backward_of(adapter: Any, config: SdpaConfig, t: Tensors, d_o: Any) -> Prepared:
    """A peer's backward through autograd: its forward once on leaves that want gradients (kept
    for every call), then each call computes dQ, dK, dV for the same dO. The first backward is
    part of preparing (Flex compiles it), reported with the forward's compile time."""
    import torch

    q, k, v = (x.detach().requires_grad_() for x in (t.q, t.k, t.v))
    forward = adapter.prepare(config, Tensors(q, k, v, t.bias))
    t0 = time.perf_counter()
    out = forward.run()

    def run() -> dict[str, Any]:
        grads = torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True)
        return dict(zip(("dQ", "dK", "dV"), grads, strict=True))

    run()
    if q.is_cuda:
        torch.cuda.synchronize()
    compiled = None if forward.compile_seconds is None else forward.compile_seconds + time.perf_counter() - t0
    why = "autograd runs the backward on its forward's stream, which a graph on another cannot capture"
    return Prepared(run, f"{forward.description}; its backward through autograd", compiled, why)


# ---- torch's SDPA backends -------------------------------------------------------------------------
TORCH_WORDS = {
    "FLASH": "FlashAttention-2 in torch",
    "EFFICIENT": "the memory-efficient kernel (xFormers) in torch",
    "CUDNN": "cuDNN's own kernel through torch (the same kernel: worth it for torch's overhead)",
    "MATH": "ATen's unfused matmul, softmax and matmul",
}


def explicit_mask(config: SdpaConfig, t: Tensors) -> Any:
    """The additive mask (b, h_q or 1, s_q, s_kv) of what no flag says (window, padding, bias,
    ALiBi, a bottom-right causal band over unequal lengths), built once, outside any timing."""
    import torch

    per_head = config.alibi or (t.bias is not None and t.bias.shape[1] > 1)
    heads = config.h_q if per_head else 1
    size = config.b * heads * config.s_q * config.s_kv * t.q.element_size()
    if size > MASK_LIMIT_BYTES:
        raise Refused(
            f"needs an explicit mask of {size / 2**30:.1f} GiB, more than {MASK_LIMIT_BYTES >> 30} GiB"
        )
    rows, out = range(config.s_q), []
    for bi in range(config.b):
        term = additive_terms(config, bi, range(0, heads), rows, t.bias, t.q.device)
        out.append(term if term is not None else torch.zeros(1, config.s_q, config.s_kv, device=t.q.device))
    return torch.stack(out).to(t.q.dtype)


def torch_call(config: SdpaConfig, t: Tensors) -> dict[str, Any]:
    """The keywords of one scaled_dot_product_attention call for this configuration."""
    kwargs: dict[str, Any] = {"scale": config.scale}
    if config.h_q != config.h_kv:
        kwargs["enable_gqa"] = True
    lo, hi = config.band(0)
    plain = not (config.window or config.varlen or config.alibi or t.bias is not None)
    if plain and (hi is None or (config.causal == "bottom_right" and config.s_q == 1)):
        return kwargs  # no mask, or one query at the bottom right: it sees every key
    if plain and hi == 0:
        return {**kwargs, "is_causal": True}
    if plain and config.causal == "bottom_right":
        from torch.nn.attention.bias import causal_lower_right

        return {**kwargs, "attn_mask": causal_lower_right(config.s_q, config.s_kv)}
    return {**kwargs, "attn_mask": explicit_mask(config, t)}


class TorchBackend:
    """torch's SDPA forced to one backend: it refuses at the first call, in its own words."""

    def __init__(self, backend: str):
        self.key, self.backend = backend.lower(), backend

    def name(self, config: SdpaConfig) -> str:
        return f"torch {self.backend} {precision(config)}"

    def unavailable(self) -> str:
        from torch.nn.attention import SDPBackend

        wanted = SDP_BACKENDS.get(self.backend, "CUDNN_ATTENTION")
        return "" if hasattr(SDPBackend, wanted) else f"this torch has no {self.backend} backend"

    def refusal(self, config: SdpaConfig, kind: str = "forward") -> str:
        if kind == "backward" and config.varlen:
            return "torch's SDPA backward gives NaN on fully masked rows, not the zeros padding means"
        return _always(config)

    def prepare_backward(self, config: SdpaConfig, t: Tensors, d_o: Any) -> Prepared:
        return backward_of(self, config, t, d_o)

    def prepare(self, config: SdpaConfig, t: Tensors) -> Prepared:
        import torch.nn.functional as F

        kwargs = torch_call(config, t)
        context = self._context

        def run() -> Any:
            with context():
                return F.scaled_dot_product_attention(t.q, t.k, t.v, **kwargs)

        return Prepared(run, TORCH_WORDS[self.backend])

    def _context(self) -> Any:
        if self.backend != "CUDNN":
            return forced(self.backend)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.CUDNN_ATTENTION)


# ---- FlexAttention ----------------------------------------------------------------------------------
class Flex:
    """torch's FlexAttention, compiled: masks as a block mask built once from a mask_mod, ALiBi
    and the bias as a score_mod. The first call compiles; its time is reported apart."""

    key = "flex"

    def name(self, config: SdpaConfig) -> str:
        return f"Flex {precision(config)}"

    def unavailable(self) -> str:
        try:
            importlib.import_module("torch.nn.attention.flex_attention")
        except ImportError as exc:
            return f"this torch has no FlexAttention ({exc})"
        return ""

    def refusal(self, config: SdpaConfig, kind: str = "forward") -> str:
        return _always(config)

    def prepare_backward(self, config: SdpaConfig, t: Tensors, d_o: Any) -> Prepared:
        return backward_of(self, config, t, d_o)

    def prepare(self, config: SdpaConfig, t: Tensors) -> Prepared:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        block_mask = None
        keep = mask_mod(config, t.q.device)
        if keep is not None:
            block_mask = create_block_mask(keep, config.b, None, config.s_q, config.s_kv, device=t.q.device)
        score = score_mod(config, t)
        compiled = torch.compile(flex_attention, dynamic=False)
        kwargs = {"block_mask": block_mask, "score_mod": score, "scale": config.scale}
        if config.h_q != config.h_kv:
            kwargs["enable_gqa"] = True

        def run() -> Any:
            return compiled(t.q, t.k, t.v, **kwargs)

        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        words = "FlexAttention, compiled (torch.compile; block mask built outside timing)"
        return Prepared(run, words, compile_seconds=time.perf_counter() - t0)


def mask_mod(config: SdpaConfig, device: Any) -> Callable | None:
    """Flex's mask_mod for the causal band, the window and the real lengths (None: no mask)."""
    import torch

    if config.band(0) == (None, None) and not config.varlen:
        return None
    big = config.s_q + config.s_kv + 1
    bands = [config.band(bi) for bi in range(config.b)]
    lo = torch.tensor([-big if band[0] is None else band[0] for band in bands], device=device)
    hi = torch.tensor([big if band[1] is None else band[1] for band in bands], device=device)
    lq = torch.tensor([config.lengths(bi)[0] for bi in range(config.b)], device=device)
    lkv = torch.tensor([config.lengths(bi)[1] for bi in range(config.b)], device=device)

    def keep(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        inside = (q_idx < lq[b]) & (kv_idx < lkv[b])
        return inside & (kv_idx <= q_idx + hi[b]) & (kv_idx > q_idx + lo[b])

    return keep


def score_mod(config: SdpaConfig, t: Tensors) -> Callable | None:
    """Flex's score_mod for ALiBi and the bias (None: neither), added to the scaled score."""
    import torch

    if not config.alibi and t.bias is None:
        return None
    slopes = torch.tensor(alibi_slopes(config.h_q), device=t.q.device) if config.alibi else None
    bias = t.bias

    def add(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        if slopes is not None:
            score = score + (kv_idx - q_idx) * slopes[h]
        if bias is not None:
            bb = b if bias.shape[0] > 1 else 0
            hh = h if bias.shape[1] > 1 else 0
            score = score + bias[bb, hh, q_idx, kv_idx]
        return score

    return add


# ---- optional: FlashAttention-3 and FlashInfer --------------------------------------------------------
def _module(name: str) -> Any:
    return importlib.import_module(name)


class Installed:
    """A peer from a package that is not a dependency: there when its module imports."""

    key = module = title = missing = ""

    def name(self, config: SdpaConfig) -> str:
        return f"{self.title} {precision(config)}"

    def unavailable(self) -> str:
        try:
            _module(self.module)
        except ImportError:
            return self.missing
        return ""

    def refusal(self, config: SdpaConfig, kind: str = "forward") -> str:
        """What the entry points driven here cannot do, then what no peer can."""
        if kind == "backward":
            return f"{self.title}'s backward is not driven here"
        if why := self.unsupported(config):
            return why
        if config.causal == "top_left" and config.s_q != config.s_kv:
            return f"{self.title} aligns causal masks bottom-right; top-left over unequal lengths differs"
        return _always(config)

    def unsupported(self, config: SdpaConfig) -> str:
        return ""


class FlashAttention3(Installed):
    """FlashAttention-3 (`flash_attn_interface`, Hopper): BSHD tensors, GQA and both causal
    alignments by its own arguments. Untested on real hardware (no wheel for our GPU box)."""

    key, module, title = "fa3", "flash_attn_interface", "FA3"
    missing = "flash_attn_interface is not installed (FlashAttention-3)"

    def unsupported(self, config: SdpaConfig) -> str:
        if config.varlen or config.alibi or config.bias != "none":
            return "padding, ALiBi and a bias need FlashAttention-3's other entry points, not driven here"
        return ""

    def prepare(self, config: SdpaConfig, t: Tensors) -> Prepared:
        fa3 = _module(self.module)
        q, k, v = (x.transpose(1, 2) for x in (t.q, t.k, t.v))  # (b, s, h, d) views of the same tensors
        causal = config.causal != "none"
        left = config.window - 1 if config.window else -1
        window = (left, 0 if causal else -1)

        def run() -> Any:
            out = fa3.flash_attn_func(q, k, v, softmax_scale=config.scale, causal=causal, window_size=window)
            out = out[0] if isinstance(out, tuple) else out
            return out.transpose(1, 2)

        return Prepared(run, "FlashAttention-3 (flash_attn_interface.flash_attn_func)")


class FlashInfer(Installed):
    """FlashInfer's single-request kernels (b=1): prefill, or decode for one query. Untested on
    real hardware (no wheel for our GPU box)."""

    key, module, title, missing = "flashinfer", "flashinfer", "FlashInfer", "flashinfer is not installed"

    def unsupported(self, config: SdpaConfig) -> str:
        if config.b != 1:
            return "only batch 1 is driven here (FlashInfer's batch wrappers plan a page table first)"
        if config.varlen or config.alibi or config.bias != "none" or config.window:
            return "padding, ALiBi, a bias and a window are not driven here"
        return ""

    def prepare(self, config: SdpaConfig, t: Tensors) -> Prepared:
        fi = _module(self.module)
        q, k, v = (x[0].transpose(0, 1) for x in (t.q, t.k, t.v))  # (s, h, d): NHD
        causal = config.causal != "none"
        if config.s_q == 1:

            def run() -> Any:
                return fi.single_decode_with_kv_cache(q[0], k, v, sm_scale=config.scale).view(
                    1, -1, 1, config.d_v
                )

            return Prepared(run, "FlashInfer single_decode_with_kv_cache")

        def run() -> Any:
            out = fi.single_prefill_with_kv_cache(q, k, v, causal=causal, sm_scale=config.scale)
            return out.transpose(0, 1).unsqueeze(0)

        return Prepared(run, "FlashInfer single_prefill_with_kv_cache")


ADAPTERS: dict[str, Any] = {
    a.key: a
    for a in (
        *(TorchBackend(b) for b in ("FLASH", "EFFICIENT", "CUDNN", "MATH")),
        Flex(),
        FlashAttention3(),
        FlashInfer(),
    )
}
assert tuple(ADAPTERS) == PEER_KEYS, "model/options.py declares the peers, in this order"


def parse_peers(text: str) -> tuple[str, ...]:
    """`flash,flex` or `all` -> the peers' keys, in the field's order; an unknown name raises
    ValueError naming it and the known ones."""
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return PEER_KEYS
    unknown = [w for w in words if w not in ADAPTERS]
    if unknown or not words:
        raise ValueError(
            f"unknown peer {', '.join(unknown) or repr(text)}: the peers are all, {', '.join(PEER_KEYS)}"
        )
    return tuple(k for k in PEER_KEYS if k in words)
