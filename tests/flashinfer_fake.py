"""A stand-in for the `flashinfer` module on the CPU, following the call sequence its documentation
prescribes: a wrapper made on a workspace buffer and a kv_layout ("NHD" or "HND"), then plan() with
the indptrs and sizes, then run() on the query and the cache. Each wrapper records its
constructor's, plan()'s and run()'s arguments, refuses a run before a plan, a plan whose indptr,
indices or last_page_len do not hold together, and a run whose tensors do not match the plan.

What it computes is FlashInfer's attention as its docs and kernels define it, written here from
them: request i holds pages indices[indptr[i]:indptr[i + 1]], the last filled to
last_page_len[i]; query row r of a request of qo_len rows sits at position r + kv_len - qo_len
(causal and the window aligned bottom-right); the window keeps keys at or after that position -
window_left; ALiBi adds slope_h * (key - query row) to the scaled score; query head h reads key
head h // (num_qo_heads / num_kv_heads); logits_soft_cap caps the scaled score as cap * tanh(s / cap). `wrong=True` makes a wrapper read each request's pages
in pool order, ignoring indices: what a misread page table gives.
"""

from __future__ import annotations

import math
import types

import torch

LAYOUTS = ("NHD", "HND")


def slopes(heads: int) -> torch.Tensor:
    """ALiBi's slopes as FlashInfer's utils compute them (Press et al.)."""
    n = 2 ** math.floor(math.log2(heads))
    out = [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]
    out += [2.0 ** (-4.0 * k / n) for k in range(1, 2 * (heads - n), 2)]
    return torch.tensor(out)


def attend(q, k, v, plan: dict, heads: tuple[int, int]) -> torch.Tensor:
    """One request: q (qo_len, h_q, d), k and v (kv_len, h_kv, d) -> (qo_len, h_q, d_v)."""
    h_q, h_kv = heads
    group = h_q // h_kv
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
    qo_len, kv_len = q.shape[0], k.shape[0]
    scale = plan["sm_scale"] if plan["sm_scale"] is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = torch.einsum("qhd,khd->hqk", q.double(), k.double()) * scale
    if plan.get("logits_soft_cap"):  # cap * tanh(x / cap) of the scaled logits
        scores = plan["logits_soft_cap"] * torch.tanh(scores / plan["logits_soft_cap"])
    rows = torch.arange(qo_len).view(-1, 1)
    keys = torch.arange(kv_len).view(1, -1)
    if plan["pos_encoding_mode"] == "ALIBI":
        scores = scores + slopes(h_q).double().view(-1, 1, 1) * (keys - rows)
    position = rows + kv_len - qo_len
    keep = torch.ones(qo_len, kv_len, dtype=torch.bool)
    if plan.get("causal"):
        keep &= keys <= position
    if plan["window_left"] >= 0:
        keep &= keys >= position - plan["window_left"]
    scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("hqk,khd->qhd", weights, v.double()).to(q.dtype)


class Wrapper:
    """What every wrapper shares: the constructor's checks, the record, the plan's checks."""

    paged = True

    def __init__(self, module, workspace, kv_layout="NHD", **kwargs):
        if not (isinstance(workspace, torch.Tensor) and workspace.dtype == torch.uint8):
            raise TypeError("float_workspace_buffer must be a uint8 tensor")
        if kv_layout not in LAYOUTS:
            raise KeyError(f"Invalid kv_layout {kv_layout}")
        self.module, self.workspace, self.kv_layout, self.planned = module, workspace, kv_layout, None
        module.record(type(self).__name__, "init", workspace=workspace, kv_layout=kv_layout, **kwargs)

    def _plan(self, name: str, plan: dict) -> None:
        indptr, batch = plan["kv_indptr"].tolist(), len(plan["kv_indptr"]) - 1
        if plan["num_qo_heads"] % plan["num_kv_heads"]:
            raise ValueError("num_qo_heads must be a multiple of num_kv_heads")
        if any(b < a for a, b in zip(indptr, indptr[1:], strict=False)) or indptr[0] != 0:
            raise ValueError(f"indptr must rise from 0: {indptr}")
        if self.paged:
            last, size = plan["last_page_len"].tolist(), plan["page_size"]
            if len(last) != batch or len(plan["indices"]) != indptr[-1]:
                raise ValueError("last_page_len needs one entry a request, indices indptr[-1]")
            for i, n in enumerate(last):
                if indptr[i + 1] > indptr[i] and not 1 <= n <= size:
                    raise ValueError(f"last_page_len[{i}] = {n} is not in 1..{size}")
        if "qo_indptr" in plan and len(plan["qo_indptr"]) - 1 != batch:
            raise ValueError("qo_indptr and the kv indptr give different batch sizes")
        self.planned = plan
        self.module.record(type(self).__name__, "plan", **plan)

    def _ready(self, q) -> dict:
        if self.planned is None:
            raise RuntimeError("plan() must be called before run()")
        p = self.planned
        rows = int(p["qo_indptr"][-1]) if "qo_indptr" in p else len(p["kv_indptr"]) - 1
        if q.shape[0] != rows:
            raise ValueError(f"q.shape[0] ({q.shape[0]}) does not match qo_indptr[-1] ({rows})")
        if q.shape[1] != p["num_qo_heads"] or q.shape[2] != p["head_dim"]:
            raise ValueError(
                f"q has shape {tuple(q.shape)}, the plan {p['num_qo_heads']} heads of {p['head_dim']}"
            )
        if q.dtype != p["q_data_type"]:
            raise ValueError(f"q is {q.dtype}, the plan said {p['q_data_type']}")
        return p

    def _pages(self, cache, p) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each request's keys and values, (kv_len, h_kv, d), gathered through its pages."""
        k, v = cache
        if self.kv_layout == "HND":
            k, v = k.transpose(1, 2), v.transpose(1, 2)  # (pages, page size, h_kv, d)
        vo = p.get("head_dim_vo", p["head_dim"])
        if k.shape[1:] != (p["page_size"], p["num_kv_heads"], p["head_dim"]) or v.shape[3] != vo:
            raise ValueError(
                f"a {self.kv_layout} cache of shape {tuple(cache[0].shape)} does not match the plan"
            )
        if k.dtype != (p["kv_data_type"] or p["q_data_type"]):
            raise ValueError(f"the cache is {k.dtype}, the plan said {p['kv_data_type']}")
        indptr, indices, last = p["kv_indptr"].tolist(), p["indices"].tolist(), p["last_page_len"].tolist()
        if indices and max(indices) >= k.shape[0]:
            raise ValueError("a page index past the pool")
        out = []
        for i in range(len(last)):
            pages = (
                list(range(indptr[i], indptr[i + 1]))
                if self.module.wrong
                else indices[indptr[i] : indptr[i + 1]]
            )
            n = (len(pages) - 1) * p["page_size"] + last[i] if pages else 0
            out.append(tuple(x[pages].flatten(0, 1)[:n] for x in (k, v)))
        return out


def _defaults(**kw) -> dict:
    return {"pos_encoding_mode": "NONE", "window_left": -1, "sm_scale": None, "q_data_type": torch.float16,
            "kv_data_type": None, **kw}  # fmt: skip


class BatchPrefillWithPagedKVCacheWrapper(Wrapper):
    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim_qk, page_size, head_dim_vo=None, causal=False, **kw):  # fmt: skip
        plan = _defaults(qo_indptr=qo_indptr, kv_indptr=paged_kv_indptr, indices=paged_kv_indices,
                         last_page_len=paged_kv_last_page_len, num_qo_heads=num_qo_heads,
                         num_kv_heads=num_kv_heads, head_dim=head_dim_qk, page_size=page_size,
                         head_dim_vo=head_dim_vo or head_dim_qk, causal=causal, **kw)  # fmt: skip
        self._plan("paged prefill", plan)

    def run(self, q, paged_kv_cache, **kw):
        p = self._ready(q)
        self.module.record(type(self).__name__, "run", q=q, paged_kv_cache=paged_kv_cache, **kw)
        qo = p["qo_indptr"].tolist()
        heads = (p["num_qo_heads"], p["num_kv_heads"])
        parts = [
            attend(q[qo[i] : qo[i + 1]], k, v, p, heads)
            for i, (k, v) in enumerate(self._pages(paged_kv_cache, p))
        ]
        return torch.cat(parts)


class BatchDecodeWithPagedKVCacheWrapper(Wrapper):
    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, **kw):
        plan = _defaults(kv_indptr=indptr, indices=indices, last_page_len=last_page_len,
                         num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                         page_size=page_size, **kw)  # fmt: skip
        if "causal" in kw or "head_dim_vo" in kw:
            raise TypeError("BatchDecodeWithPagedKVCacheWrapper.plan() takes no causal or head_dim_vo")
        self._plan("decode", plan)

    def run(self, q, paged_kv_cache, **kw):
        p = self._ready(q)
        self.module.record(type(self).__name__, "run", q=q, paged_kv_cache=paged_kv_cache, **kw)
        heads = (p["num_qo_heads"], p["num_kv_heads"])
        parts = [
            attend(q[i : i + 1], k, v, p, heads) for i, (k, v) in enumerate(self._pages(paged_kv_cache, p))
        ]
        return torch.cat(parts)


class BatchPrefillWithRaggedKVCacheWrapper(Wrapper):
    paged = False

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None,
             causal=False, **kw):  # fmt: skip
        plan = _defaults(qo_indptr=qo_indptr, kv_indptr=kv_indptr, num_qo_heads=num_qo_heads,
                         num_kv_heads=num_kv_heads, head_dim=head_dim_qk, head_dim_vo=head_dim_vo or head_dim_qk,
                         causal=causal, **kw)  # fmt: skip
        self._plan("ragged prefill", plan)

    def run(self, q, k, v, **kw):
        p = self._ready(q)
        self.module.record(type(self).__name__, "run", q=q, k=k, v=v, **kw)
        qo, kv = p["qo_indptr"].tolist(), p["kv_indptr"].tolist()
        if k.shape[0] != kv[-1] or k.shape[1] != p["num_kv_heads"] or v.shape[2] != p["head_dim_vo"]:
            raise ValueError(
                f"k has shape {tuple(k.shape)}, the plan {kv[-1]} tokens of {p['num_kv_heads']} heads"
            )
        heads = (p["num_qo_heads"], p["num_kv_heads"])
        parts = [attend(q[qo[i] : qo[i + 1]], k[kv[i] : kv[i + 1]], v[kv[i] : kv[i + 1]], p, heads)
                 for i in range(len(qo) - 1)]  # fmt: skip
        return torch.cat(parts)


class Module(types.SimpleNamespace):
    """The fake module: its wrappers made on it, and `calls`. Nothing it holds refers back to it,
    so what a test recorded (a 128 MB workspace each) is freed with it when the test ends, not
    left in a cycle the suite's frozen collector never walks."""

    def record(self, wrapper: str, event: str, **kw) -> None:
        self.calls.append((wrapper, event, kw))

    def __getattr__(self, name: str):
        cls = WRAPPERS.get(name)
        if cls is None:
            raise AttributeError(name)
        return lambda *a, **kw: cls(self, *a, **kw)


WRAPPERS = {cls.__name__: cls for cls in (BatchPrefillWithPagedKVCacheWrapper, BatchDecodeWithPagedKVCacheWrapper,
                                          BatchPrefillWithRaggedKVCacheWrapper)}  # fmt: skip


def module(wrong: bool = False) -> Module:
    """A fresh fake `flashinfer`: its wrappers, and `calls`, (wrapper, event, arguments) in order."""
    return Module(calls=[], wrong=wrong)


def events(fake, event: str) -> list[tuple[str, dict]]:
    return [(wrapper, kw) for wrapper, e, kw in fake.calls if e == event]
