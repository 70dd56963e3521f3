"""FlashAttention-4 as a peer (`flash_attn.cute`, the `peers` extra: `uv sync --extra peers`).

Its two entry points: `flash_attn_func` on (b, s, h, d) views of the same tensors, and
`flash_attn_varlen_func` where lengths vary: real lengths as `seqused_q` / `seqused_k` on the
batched tensors (padding), packed tokens with `cu_seqlens_q` / `cu_seqlens_k` (THD), a page pool
with its `page_table` (paged KV). GQA and MQA are its own (fewer kv heads than query heads), the
sink logits its `learnable_sink`, a softcap variant its `softcap` (softcap-causal's mask and
window its own causal and window_size). FA4 aligns causal masks and windows bottom-right (its
mask counts from the end of the keys): a top-left mask or a window over unequal lengths is a
field it cannot take. There is no ALiBi, bias or dropout in its interface. The prefix-LM and
document variants are its `mask_mod`, a CuTe DSL function of (batch, head, q_idx, kv_idx,
seqlen_info, aux_tensors) that FA4 calls with each position as a (1,) Int32 TensorSSA and that
replaces its causal and window masks: the prefix as a constant, the documents as each key's
document number, an int32 tensor in `aux_tensors` (without block sparsity: every tile is
computed, then masked). Its first call for a shape
compiles (the CuTe DSL), done while preparing and reported apart from kernel time; FA4's own
assertions (a head dim, a GPU) are its refusal, in its words. Its backward runs through autograd
(FlashAttnFunc's backward), the same way the other peers' do (peer_base.backward_of).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..model.config import SdpaConfig
from . import storage
from .peer_base import OptionalPeer, Prepared, Refused, Tensors, always, backward_of, lengths_of, starts

MODULE = "flash_attn.cute"
MISSING = "flash_attn.cute is not installed (FlashAttention-4): uv sync --extra peers"
# where FA4's own refusals come from: its assertions, and the CuTe DSL's compile errors
FA4_ERRORS = ("flash_attn", "cutlass", "quack", "tvm_ffi")


def _module() -> Any:
    return importlib.import_module(MODULE)


def unsupported(config: SdpaConfig, kind: str = "forward") -> str:
    """The field FA4 has no equivalent for, in one line ('' : it takes the configuration)."""
    if config.alibi:
        return "FA4 takes no ALiBi"
    if config.bias != "none":
        return "FA4 takes no bias"
    if config.dropout:
        return "FA4 takes no dropout"
    modifier = _modifier(config)
    if modifier.name not in ("none", "softcap", "softcap-causal", *MASK_MODS):
        return f"FA4 takes no {modifier.name} score modifier here"
    own = modifier.masks and modifier.name not in MASK_MODS  # softcap-causal: FA4's own causal mask
    aligned = config.causal != "none" or config.window or own
    unequal = any(config.lengths(i)[0] != config.lengths(i)[1] for i in range(config.b))
    if aligned and config.causal != "bottom_right" and unequal:
        what = "a top-left causal mask" if config.causal == "top_left" else "a window without a causal mask"
        what = f"{modifier.name}'s top-left causal mask" if own else what
        return f"FA4 aligns causal masks and windows bottom-right: {what} over unequal lengths differs"
    if kind == "backward" and config.paged:
        return "FA4 has no backward through a page table (paged KV is its forward's)"
    return always(config, sinks=True, modifiers=True)  # it takes sinks; its modifiers are said above


def _modifier(config: SdpaConfig) -> Any:
    """The configuration's score modifier (model/variants.py), none where it has no such field."""
    from ..model.variants import Variant

    return config.modifier if getattr(config, "variant", "none") != "none" else Variant()


MASK_MODS = ("prefix-lm", "document")  # the variants FA4 takes as a mask_mod of its own


@dataclass(frozen=True)
class Dsl:
    """What a mask_mod is written in: FA4's CuTe DSL (cute.jit, a constant as a (1,) Int32
    TensorSSA, an aux tensor's element at an index as one), or torch where a test stands in for FA4."""

    jit: Callable[[Callable], Callable]
    const: Callable[[int], Any]
    at: Callable[[Any, Any], Any]


@cache
def _dsl() -> Dsl:
    """FA4's CuTe DSL, made once: the same functions each call, so FA4's compile cache, keyed by
    the mask_mod's code and what it captures, finds a mask_mod it compiled before."""
    import cutlass
    import cutlass.cute as cute
    from flash_attn.cute import utils

    def const(n: int) -> Any:
        return utils.scalar_to_ssa(n, cutlass.Int32)

    def at(tensor: Any, index: Any) -> Any:
        return utils.scalar_to_ssa(tensor[index[0]], cutlass.Int32)

    return Dsl(cute.jit, const, at)


def mask_mod(config: SdpaConfig, device: Any, dsl: Dsl | None = None) -> dict[str, Any]:
    """The prefix-LM or document variant as FA4's mask_mod (and its aux tensors), {} for any other:
    top-left causal after a bidirectional prefix (j < P or j <= i), or causal inside each document
    (j <= i, and j's document is i's: each position's document number, int32, made here once)."""
    import torch

    modifier = _modifier(config)
    if modifier.name not in MASK_MODS:
        return {}
    dsl = dsl or _dsl()
    const, at = dsl.const, dsl.at
    # FA4's signature, without annotations (cute.jit would read them as the arguments' types)
    if modifier.name == "prefix-lm":
        prefix = modifier.prefix

        def prefix_lm(batch, head, q_idx, kv_idx, seqlen_info, aux_tensors):
            return (kv_idx < const(prefix)) | (kv_idx <= q_idx)

        return {"mask_mod": dsl.jit(prefix_lm)}
    lengths = torch.tensor(modifier.documents, device=device)
    documents = torch.repeat_interleave(torch.arange(len(modifier.documents), device=device), lengths)

    def document(batch, head, q_idx, kv_idx, seqlen_info, aux_tensors):
        ids = aux_tensors[0]
        return (kv_idx <= q_idx) & (at(ids, q_idx) == at(ids, kv_idx))

    return {"mask_mod": dsl.jit(document), "aux_tensors": [documents.to(torch.int32).contiguous()]}


def mask_keywords(config: SdpaConfig) -> dict[str, Any]:
    """causal, window_size and softcap as FA4 takes them: the window's left side is the keys
    before the query's own (window - 1), its right side 0 under a causal mask, else unbounded
    (None); a softcap variant's cap as `softcap` (FA4 caps the scaled scores, as cuDNN's
    score_mod does), softcap-causal's mask and window as FA4's own. A prefix-LM or document
    variant's mask is its mask_mod (mask_mod()), which FA4 takes in place of causal and a window."""
    modifier = _modifier(config)
    causal = config.causal != "none" or (modifier.masks and modifier.name not in MASK_MODS)
    window = modifier.window if modifier.masks else config.window
    kwargs: dict[str, Any] = {"softmax_scale": config.scale, "causal": causal}
    if window:
        kwargs["window_size"] = (window - 1, 0 if causal else None)
    if modifier.cap is not None:
        kwargs["softcap"] = modifier.cap
    return kwargs


def call(config: SdpaConfig, t: Tensors) -> tuple[str, tuple[Any, Any, Any], dict[str, Any]]:
    """(entry point, (q, k, v) as FA4 reads them, keywords) of one call for this configuration,
    every tensor made here, once, outside any timing: (b, s, h, d) views, packed tokens (THD),
    a page pool in FA4's (pages, page size, h_kv, d) with its table, the lengths as int32."""
    import torch

    device = t.q.device
    q, k, v = (x.transpose(1, 2) for x in (t.q, t.k, t.v))  # (b, s, h, d) views of the same tensors
    kwargs = {**mask_keywords(config), **mask_mod(config, device)}
    if t.sink is not None:
        kwargs["learnable_sink"] = t.sink.reshape(config.h_q).float().contiguous()
    if config.deterministic:
        kwargs["deterministic"] = True

    def ints(values: list[int]) -> Any:
        return torch.tensor(values, dtype=torch.int32, device=device)

    if not (config.packed or config.paged or config.varlen):
        return "flash_attn_func", (q, k, v), kwargs
    lq, lkv = lengths_of(config, 0), lengths_of(config, 1)
    if config.packed:
        q = storage.pack(torch, config, t.q, "q")
        kwargs.update(cu_seqlens_q=ints(starts(lq)), max_seqlen_q=max(lq))
    elif lq != [config.s_q] * config.b:
        kwargs.update(seqused_q=ints(lq), max_seqlen_q=config.s_q)
    if config.paged:
        table = ints([page for row in storage.page_table(config) for page in row]).view(config.b, -1)
        k, v = (storage.to_pages(torch, config, x, table).transpose(1, 2).contiguous() for x in (t.k, t.v))
        kwargs.update(page_table=table, seqused_k=ints(lkv))
    elif config.packed:
        k, v = (storage.pack(torch, config, x, name) for x, name in ((t.k, "k"), (t.v, "v")))
        kwargs.update(cu_seqlens_k=ints(starts(lkv)), max_seqlen_k=max(lkv))
    elif lkv != [config.s_kv] * config.b:
        kwargs.update(seqused_k=ints(lkv), max_seqlen_k=config.s_kv)
    return "flash_attn_varlen_func", (q, k, v), kwargs


def fa4_words(exc: BaseException) -> str:
    """FA4's refusal in its own words: the first line of what it raised."""
    text = str(exc).strip().split("\n", 1)[0] or type(exc).__name__
    return f"FA4: {text}"


def _fa4_error(exc: BaseException) -> bool:
    return isinstance(exc, AssertionError) or type(exc).__module__.startswith(FA4_ERRORS)


class FlashAttention4(OptionalPeer):
    """FlashAttention-4 through `flash_attn.cute`: where installed, for what its interface takes."""

    key, module, title, missing = "fa4", MODULE, "FA4", MISSING

    def load(self) -> Any:
        return _module()  # the module's own look-up, which a test can stand in for

    def refusal(self, config: SdpaConfig, kind: str = "forward") -> str:
        return unsupported(config, kind)

    def prepare(self, config: SdpaConfig, t: Tensors) -> Prepared:
        """One call ready to time: its tensors made, then its first call (the compile) run and
        waited for; its time is the compile's, reported apart."""
        import torch

        fa4 = _module()
        entry, (q, k, v), kwargs = call(config, t)
        function = getattr(fa4, entry)

        def run() -> Any:
            out = function(q, k, v, **kwargs)
            out = out[0] if isinstance(out, tuple) else out  # (out, lse)
            return out if config.packed else out.transpose(1, 2)

        def logical(out: Any) -> Any:  # packed tokens back to (b, h, s, d): for the check only
            return storage.unpack(torch, config, out, "o", config.o_dims) if config.packed else out

        t0 = time.perf_counter()
        try:
            run()
            if t.q.is_cuda:
                torch.cuda.synchronize()
        except Exception as exc:
            if _fa4_error(exc):
                raise Refused(fa4_words(exc)) from exc
            raise
        words = f"FlashAttention-4 ({MODULE}.{entry}; compiled by the CuTe DSL at its first call)"
        if "mask_mod" in kwargs:
            words += f"; {_modifier(config).name} as its mask_mod, every tile computed (no block sparsity)"
        return Prepared(run, words, compile_seconds=time.perf_counter() - t0, logical=logical)

    def prepare_backward(self, config: SdpaConfig, t: Tensors, d_o: Any) -> Prepared:
        """dQ, dK, dV through FA4's backward (autograd); its assertions are its refusal."""
        try:
            prepared = backward_of(self, config, t, d_o)
        except Refused:
            raise
        except Exception as exc:
            if _fa4_error(exc):
                raise Refused(fa4_words(exc)) from exc
            raise
        return prepared
