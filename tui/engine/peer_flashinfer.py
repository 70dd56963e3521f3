"""FlashInfer as a peer at any batch: its batch wrappers, planned from the configuration's own
storage and run on it, timed like a cuDNN plan and checked against the same fp32 reference.

Which wrapper:
- a paged configuration: `BatchPrefillWithPagedKVCacheWrapper`, or for one query a sequence
  `BatchDecodeWithPagedKVCacheWrapper`, over the engine's own pools and page table (the pages
  cuDNN reads): a pool is (pages, h_kv, page size, d), FlashInfer's HND layout, and the table
  becomes FlashInfer's indptr, indices and last_page_len (`paged_kv`);
- no pages, one query a sequence: the decode wrapper over the dense K and V seen as NHD pages of
  16 tokens, each sequence's in a row (a view of BSHD memory where 16 divides s_kv, else copied
  into such pages once, outside timing);
- no pages, longer queries: `BatchPrefillWithRaggedKVCacheWrapper` on the tokens packed one
  sequence after another (a view of BSHD memory at full lengths; with padding or another layout,
  the real tokens packed once, outside timing).

The call order FlashInfer's documentation prescribes: a wrapper on a float workspace buffer
(allocated once, zeroed) and a kv_layout, `plan(...)` with the indptrs and sizes, then `run(q,
cache)`. plan() is timed apart (its time is the row's compile time); only run() is timed as
kernel time. Its masks its own way: causal and the window aligned bottom-right (its docs' custom
mask example, `tril(diagonal=kv_len - qo_len)`, equals `causal=True`), the window as window_left
= window - 1 (inclusive), ALiBi as pos_encoding_mode ALIBI (its slopes are cuDNN's), sm_scale,
a softcap variant as logits_soft_cap.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig
from . import fp8, storage
from .peer_base import OptionalPeer, Prepared, Tensors, always, lengths_of, starts

WORKSPACE_BYTES = 128 << 20  # FlashInfer's recommended float workspace
DENSE_PAGE = 16  # tokens a page of a dense cache seen as pages (vLLM's default block)
INSTALL = "pip install flashinfer-python"


def _module(name: str) -> Any:
    return importlib.import_module(name)


@dataclass(frozen=True)
class PagedKV:
    """FlashInfer's view of a paged cache: request i holds pages indices[indptr[i]:indptr[i + 1]],
    the last of them filled to last_page_len[i] tokens (1 to the page size)."""

    indptr: list[int]
    indices: list[int]
    last_page_len: list[int]


def paged_kv(config: SdpaConfig, table: list[list[int]], page_size: int) -> PagedKV:
    """The engine's page table (a row a sequence, padded past its pages by repeating the last)
    as FlashInfer's indptr, indices and last_page_len: each sequence's pages its real key/value
    length needs, in token order."""
    indptr, indices, last = [0], [], []
    for i, row in enumerate(table):
        kv = config.lengths(i)[1]
        n = -(-kv // page_size)
        indices += row[:n]
        indptr.append(indptr[-1] + n)
        last.append(kv - (n - 1) * page_size if n else 0)
    return PagedKV(indptr, indices, last)


def modifier(config: SdpaConfig) -> tuple[dict[str, Any], str]:
    """(what plan() is told of the score modifier, why FlashInfer has none for it): a softcap is
    its logits_soft_cap (the same cap * tanh(s / cap) of the scaled score), softcap-causal that
    with its causal mask and window; prefix-lm and document masks have no equivalent driven here."""
    v = config.modifier
    if v.name == "none":
        return {}, ""
    if v.name == "softcap":
        return {"logits_soft_cap": v.cap}, ""
    if v.name == "softcap-causal":
        return {"logits_soft_cap": v.cap, "causal": True, "window_left": v.window - 1 if v.window else -1}, ""
    return {}, f"variant {v.name}: FlashInfer has no such score modifier (its custom mask is not driven here)"


def misaligned(config: SdpaConfig) -> str:
    """Why FlashInfer's bottom-right alignment differs from the configuration's mask ('': it does
    not): a top-left causal mask (the configuration's, or one a score modifier writes), or a window
    without one (aligned top-left), over a batch entry whose real query and key/value lengths differ."""
    unequal = any(lq != lkv for lq, lkv in (config.lengths(i) for i in range(config.b)))
    if not unequal:
        return ""
    if config.modifier.name == "softcap-causal":
        return "variant softcap-causal over unequal lengths: FlashInfer aligns its causal mask bottom-right"
    if config.causal == "top_left":
        return "causal top-left over unequal lengths: FlashInfer aligns its causal mask bottom-right"
    if config.causal == "none" and config.window:
        return "window without a causal mask over unequal lengths: FlashInfer aligns its window bottom-right"
    return ""


def _decoder(fi: Any, ws: Any, config: SdpaConfig, layout: str) -> Any:
    """The decode wrapper; on tensor cores past 4 query heads a kv head (FlashInfer's CUDA-core
    decode kernels are built for groups of up to 8, its tensor-core ones for any, and faster there)."""
    if config.h_q // config.h_kv > 4:
        return fi.BatchDecodeWithPagedKVCacheWrapper(ws, layout, use_tensor_cores=True)
    return fi.BatchDecodeWithPagedKVCacheWrapper(ws, layout)


def decodes(config: SdpaConfig) -> bool:
    """Whether the decode wrapper runs it: one query a sequence, and one head dim (its plan takes one)."""
    return all(config.lengths(i)[0] == 1 for i in range(config.b)) and config.d_qk == config.d_v


class FlashInfer(OptionalPeer):
    """The FlashInfer peer: `flashinfer` (flashinfer-python) where it imports."""

    def load(self) -> Any:
        return _module(self.module)  # the module's own look-up, which a test can stand in for

    key, module, title = "flashinfer", "flashinfer", "FlashInfer"
    missing = f"flashinfer is not installed: {INSTALL}"

    def __init__(self) -> None:
        self._workspace: dict[str, Any] = {}  # by device: allocated once, reused by every plan

    def refusal(self, config: SdpaConfig, kind: str = "forward") -> str:
        """The fields FlashInfer has no equivalent for, in one line naming the field."""
        if kind == "backward":
            return "FlashInfer has no backward: its kernels serve inference"
        if config.bias != "none":
            return "bias: FlashInfer adds no bias to the scores (its custom mask is true or false)"
        if config.sink:
            return "sink tokens: FlashInfer's sink logits are not driven here"
        return modifier(config)[1] or misaligned(config) or always(config, modifiers=True)

    def prepare_backward(self, config: SdpaConfig, t: Tensors, d_o: Any) -> Prepared:
        raise NotImplementedError(self.refusal(config, "backward"))

    def workspace(self, torch: Any, device: Any) -> Any:
        key = str(device)
        if key not in self._workspace:
            self._workspace[key] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        return self._workspace[key]

    def prepare(self, config: SdpaConfig, t: Tensors) -> Prepared:
        import torch

        fi = _module(self.module)
        if config.paged:
            call = _paged(fi, torch, config, t, self.workspace(torch, t.q.device))
        elif decodes(config):
            call = _dense_decode(fi, torch, config, t, self.workspace(torch, t.q.device))
        else:
            call = _ragged(fi, torch, config, t, self.workspace(torch, t.q.device))
        t0 = time.perf_counter()
        call.wrapper.plan(*call.plan_args, **call.plan_kwargs)
        if t.q.is_cuda:
            torch.cuda.synchronize()
        planned = time.perf_counter() - t0
        wrapper, run_args = call.wrapper, call.run_args

        def run() -> Any:
            return wrapper.run(*run_args)

        words = f"FlashInfer {call.what}; plan() {planned * 1e3:.1f} ms (shown as its compile time, outside kernel time)"
        return Prepared(run, words, compile_seconds=planned, logical=call.logical)


@dataclass(frozen=True)
class _Call:
    """One wrapper, what its plan() is given and what each run() is; `logical` reads its output
    back as (b, h_q, s_q, d_v)."""

    wrapper: Any
    what: str
    plan_args: tuple
    plan_kwargs: dict[str, Any]
    run_args: tuple
    logical: Any


def _keywords(config: SdpaConfig, q: Any, k: Any) -> dict[str, Any]:
    """What every plan() is told of the configuration: position encoding, window, scale, dtypes,
    the score modifier's soft cap (and its window; its causal mask is a prefill's)."""
    kwargs = {
        "pos_encoding_mode": "ALIBI" if config.alibi else "NONE",
        "window_left": config.window - 1 if config.window else -1,
        "sm_scale": config.scale,
        "q_data_type": q.dtype,
        "kv_data_type": k.dtype,
    }
    return {**kwargs, **{key: value for key, value in modifier(config)[0].items() if key != "causal"}}


def _prefill_keywords(config: SdpaConfig, q: Any, k: Any) -> dict[str, Any]:
    causal = config.causal != "none" or "causal" in modifier(config)[0]
    kwargs = {**_keywords(config, q, k), "causal": causal}
    if config.d_v != config.d_qk:
        kwargs["head_dim_vo"] = config.d_v
    return kwargs


def _tokens(torch: Any, config: SdpaConfig, x: Any, name: str) -> Any:
    """(real tokens, h, d) of a logical (b, h, s, d) tensor, one sequence after another: a view of
    BSHD memory at full lengths, else a copy made here, outside timing."""
    if not config.padded:
        return x.transpose(1, 2).reshape(-1, x.shape[1], x.shape[3])
    return storage.pack(torch, config, x, name).contiguous()


def _output(torch: Any, config: SdpaConfig) -> Any:
    """Reads a prefill's (real query tokens, h_q, d_v) output as logical O (zeros past each real length)."""

    def logical(out: Any) -> Any:
        if not config.varlen:
            return out.view(config.b, config.s_q, config.h_q, config.d_v).transpose(1, 2)
        return storage.unpack(torch, config, out, "o", config.o_dims)

    return logical


def _int32(torch: Any, values: list[int], device: Any) -> Any:
    return torch.tensor(values, dtype=torch.int32, device=device)


def _pools(torch: Any, config: SdpaConfig, t: Tensors) -> tuple[Any, Any, list[list[int]]]:
    """The engine's own K and V pools and page table (FP8's dequantised to the peers' precision,
    page for page); without them, pools made from the logical tensors as the engine makes them."""
    data = t.stored if t.stored is not None and "paged_attention_k_table" in t.stored else None
    if data is None:
        data = {"k": t.k, "v": t.v}
        storage.physical(config, data, ("k", "v"))
    k, v = (fp8.values(config, data, name).to(t.q.dtype) for name in ("k", "v"))
    table = data["paged_attention_k_table"].view(config.b, -1).tolist()
    return k, v, table


def _paged(fi: Any, torch: Any, config: SdpaConfig, t: Tensors, ws: Any) -> _Call:
    device, size = t.q.device, config.page_size or 1
    k, v, table = _pools(torch, config, t)
    kv = paged_kv(config, table, size)
    pages = (_int32(torch, kv.indptr, device), _int32(torch, kv.indices, device))
    last = _int32(torch, kv.last_page_len, device)
    heads = (config.h_q, config.h_kv, config.d_qk, size)
    where = (
        f"HND pages of {size} (the engine's pools and page table{', FP8 dequantised' if config.fp8 else ''})"
    )
    if decodes(config):
        wrapper = _decoder(fi, ws, config, "HND")
        q = t.q[:, :, 0].contiguous()
        return _Call(wrapper, f"BatchDecodeWithPagedKVCacheWrapper, {where}", (*pages, last, *heads),
                     _keywords(config, q, k), (q, (k, v)), lambda out: out.unsqueeze(2))  # fmt: skip
    wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "HND")
    q = _tokens(torch, config, t.q, "q")
    qo = _int32(torch, starts(lengths_of(config, 0)), device)
    return _Call(wrapper, f"BatchPrefillWithPagedKVCacheWrapper, {where}", (qo, *pages, last, *heads),
                 _prefill_keywords(config, q, k), (q, (k, v)), _output(torch, config))  # fmt: skip


def _dense_pool(config: SdpaConfig, x: Any) -> Any:
    """Dense K or V (b, h, s, d) as a pool of NHD pages of DENSE_PAGE tokens, each sequence's in a
    row: a view of BSHD memory where the page divides s_kv, else a copy made here, outside timing
    (a page a whole sequence would leave FlashInfer's decode no pages to split the keys by)."""
    per_seq, (b, h, s, d) = -(-config.s_kv // DENSE_PAGE), x.shape
    tokens = x.transpose(1, 2)  # (b, s, h, d)
    if not (tokens.is_contiguous() and s % DENSE_PAGE == 0):
        padded = x.new_zeros((b, per_seq * DENSE_PAGE, h, d))
        padded[:, :s] = tokens
        tokens = padded
    return tokens.reshape(b * per_seq, DENSE_PAGE, h, d)


def _dense_decode(fi: Any, torch: Any, config: SdpaConfig, t: Tensors, ws: Any) -> _Call:
    device, per_seq = t.q.device, -(-config.s_kv // DENSE_PAGE)
    k, v = _dense_pool(config, t.k), _dense_pool(config, t.v)
    table = [list(range(i * per_seq, (i + 1) * per_seq)) for i in range(config.b)]
    kv = paged_kv(config, table, DENSE_PAGE)
    plan = (_int32(torch, kv.indptr, device), _int32(torch, kv.indices, device),
            _int32(torch, kv.last_page_len, device), config.h_q, config.h_kv, config.d_qk, DENSE_PAGE)  # fmt: skip
    wrapper = _decoder(fi, ws, config, "NHD")
    q = t.q[:, :, 0].contiguous()
    how = "a view of BSHD memory" if k.data_ptr() == t.k.data_ptr() else "copied into pages"
    what = f"BatchDecodeWithPagedKVCacheWrapper, the dense K and V as NHD pages of {DENSE_PAGE} ({how})"
    return _Call(wrapper, what, plan, _keywords(config, q, k), (q, (k, v)), lambda out: out.unsqueeze(2))


def _ragged(fi: Any, torch: Any, config: SdpaConfig, t: Tensors, ws: Any) -> _Call:
    device = t.q.device
    q, k, v = (_tokens(torch, config, x, name) for x, name in ((t.q, "q"), (t.k, "k"), (t.v, "v")))
    qo = _int32(torch, starts(lengths_of(config, 0)), device)
    kv = _int32(torch, starts(lengths_of(config, 1)), device)
    wrapper = fi.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
    plan = (qo, kv, config.h_q, config.h_kv, config.d_qk)
    what = "BatchPrefillWithRaggedKVCacheWrapper, NHD tokens packed one sequence after another"
    return _Call(wrapper, what, plan, _prefill_keywords(config, q, k), (q, k, v), _output(torch, config))
