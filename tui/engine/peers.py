"""The field: other ways to compute the same attention, each run on the same logical tensors,
timed like a cuDNN plan and checked against the same fp32 reference (peer_runs.py measures them).

torch's SDPA forced to one backend at a time (FLASH, EFFICIENT, CUDNN: cuDNN's own kernel, worth
timing for torch's overhead around it, and MATH), FlexAttention (compiled; its compile time is
kept apart from its kernel time), FlashAttention-4 where the `peers` extra brings it (its adapter
in peer_fa4.py), and, where importable, FlashAttention-3 and FlashInfer (neither is a
dependency; their adapters are tested against fake modules only, FlashInfer's at any batch in
peer_flashinfer.py). Each adapter turns a configuration into one callable that returns O as
(b, h_q, s_q, d_v), or says in one line why it cannot run it. Masks and GQA are each peer's own way: torch's enable_gqa and is_causal, an explicit
additive mask only where nothing else says it, Flex's mask_mod and score_mod.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from ..model.config import SdpaConfig
from ..model.options import PEER_KEYS
from .modifiers import flex_mask_mod, flex_score_mod
from .peer import SDP_BACKENDS, forced
from .peer_base import OptionalPeer, Prepared, Refused, Tensors, backward_of, precision
from .peer_base import always as _always
from .peer_fa4 import FlashAttention4
from .peer_flashinfer import FlashInfer
from .reference import additive_terms, alibi_slopes

MASK_LIMIT_BYTES = 2 << 30  # an explicit mask larger than this is not built: the peer says so


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
    plain = not (
        config.window or config.varlen or config.alibi or t.bias is not None or config.modifier.masks
    )
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
        if config.modifier.cap is not None:
            return f"the score modifier {config.variant}: torch's SDPA cannot cap the scores"
        return _always(config, modifiers=True)  # a variant's mask goes as an explicit mask

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
    """torch's FlexAttention, compiled: masks as a block mask built once from a mask_mod, ALiBi,
    the bias and a variant's softcap as a score_mod (a variant's mask as the mask_mod: the same
    functions as the reference's, modifiers.py). The first call compiles; its time is reported apart."""

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
        return _always(config, modifiers=True)

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
        lift_recompile_limit(torch)
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


def lift_recompile_limit(torch: Any) -> None:
    """torch.compile runs a function eagerly, silently, once it has compiled it for 8 shapes (its
    recompile limit), and one engine process times Flex for many configurations: an eager Flex
    is 40-90x slower than its kernel (a check on the H200 timed llama3-8b-prefill's Flex at
    75.0 ms after 8 other shapes). So the limit is lifted, and reaching it is an error, never a
    figure."""
    config = torch._dynamo.config
    for name in (
        "recompile_limit",
        "cache_size_limit",
        "accumulated_recompile_limit",
        "accumulated_cache_size_limit",
    ):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), 1 << 20))
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True


def mask_mod(config: SdpaConfig, device: Any) -> Callable | None:
    """Flex's mask_mod for the causal band, the window and the real lengths, or the variant's mask
    (alone: cuDNN takes it beside no other); None: no mask."""
    import torch

    if config.modifier.masks:
        return flex_mask_mod(config.modifier)
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
    """Flex's score_mod for a variant's softcap, then ALiBi and the bias added to the scaled score
    (None: none of them)."""
    import torch

    if not config.alibi and t.bias is None:
        return flex_score_mod(config.modifier)
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

    return flex_score_mod(config.modifier, add)


# ---- optional: FlashAttention-3 (FA4 in peer_fa4.py, FlashInfer in peer_flashinfer.py) ---------------
def _module(name: str) -> Any:
    return importlib.import_module(name)


class Installed(OptionalPeer):
    """FA3 and the like: a package's entry points driven for what they take."""

    def load(self) -> Any:
        return _module(self.module)  # the module's own look-up, which a test can stand in for

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


ADAPTERS: dict[str, Any] = {
    a.key: a
    for a in (
        *(TorchBackend(b) for b in ("FLASH", "EFFICIENT", "CUDNN", "MATH")),
        Flex(),
        FlashAttention3(),
        FlashAttention4(),
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
