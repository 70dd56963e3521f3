"""The cross-check: every checked output against fp64 math on the same tensors, written apart from
the fp32 reference (reference.py), so that a disagreement has an owner (model/whose.py).

It is the plain formula, one batch entry and one query head at a time: the scores q k^T * scale
(a softcap's tanh first), the bias, ALiBi and every mask as -inf, the sink as one more column,
softmax, the dropout mask cuDNN drew, then V; in float64, with K and V read by the query head's
own key/value head (GQA by index, not by the reference's grouping). The backward is autograd of
that in float64. It reads the masks from the configuration's fields, not from the reference's
helpers. Rows longer than a block are taken a block at a time so one block's scores stay under
FP64_BLOCK_BYTES; a problem whose fp64 work is above the device's budget is not cross-checked
(its note says so). It runs only when asked (RunOptions.cross_check).
"""

from __future__ import annotations

from typing import Any

from ..model.config import SdpaConfig
from ..model.results import ErrorMetrics
from .cancel import between_chunks
from .tolerances import compare

INDEPENDENT_NAME = (
    "fp64 math on the same tensors (one head at a time, masks from the fields, autograd in fp64)"
)
FP64_BLOCK_BYTES = 128 << 20  # one block's fp64 scores (and, for autograd, what it keeps)
FP64_MAX_FLOPS = {"cpu": 4e9, "cuda": 4e13}  # a few seconds of fp64 on a small CPU; on an H200


def work(config: SdpaConfig, backward: bool) -> float:
    """FLOPs of the fp64 check: every score of every head, twice for V; 3.5 times that with autograd."""
    dense = 2.0 * config.b * config.h_q * config.s_q * config.s_kv * (config.d_qk + config.d_v)
    return dense * (3.5 if backward else 1.0)


def too_big(config: SdpaConfig, backward: bool, device: str) -> str:
    """Why the fp64 check is not made here ('' when it is)."""
    limit = FP64_MAX_FLOPS["cpu" if device == "cpu" else "cuda"]
    cost = work(config, backward)
    if cost > limit:
        return f"not cross-checked in fp64: {cost / 1e9:.0f} GFLOP of fp64 math, above the {limit / 1e9:.0f} GFLOP budget"
    return ""


def slopes(h: int) -> list[float]:
    """ALiBi's slope of each head: the geometric series for the largest power of two n <= h, then
    the odd steps of the series for 2n (as cuDNN and the ALiBi paper give them)."""
    n = 1 << (h.bit_length() - 1)
    first = [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]
    return first + [2.0 ** (-4.0 * (2 * k + 1) / n) for k in range(h - n)]


def _kept(config: SdpaConfig, batch: int, i: Any, j: Any) -> Any:
    """True where query row i keeps key j of one batch entry (broadcast (rows, 1) x (1, keys))."""
    import torch

    lq = config.seq_lens_q[batch] if config.seq_lens_q else config.s_q
    lkv = config.seq_lens_kv[batch] if config.seq_lens_kv else config.s_kv
    kept = (i < lq) & (j < lkv)
    shift = lkv - lq if config.causal == "bottom_right" else 0
    if config.causal != "none":
        kept = kept & (j - i <= shift)
    if config.window:
        kept = kept & (j - i > shift - config.window)
    v = config.modifier
    if v.masks:  # top-left causal inside the modifier, then its window, prefix or documents
        inside = j <= i
        if v.window:
            inside = inside & (i - j < v.window)
        if v.prefix is not None:
            inside = inside | (j < v.prefix)
        if len(v.documents) > 1:
            bounds = torch.tensor(list(v.starts[1:]), device=i.device)
            inside = inside & (
                torch.bucketize(i, bounds, right=True) == torch.bucketize(j, bounds, right=True)
            )
        kept = kept & inside
    return kept


class _Block:
    """One query head's block of rows in one batch entry: its leaves in fp64 (autograd's, when
    asked) and where they come from."""

    def __init__(self, config: SdpaConfig, inputs: Any, batch: int, head: int, rows: range, grad: bool):
        self.config, self.inputs, self.batch, self.head, self.rows = config, inputs, batch, head, rows
        self.kv = head * config.h_kv // config.h_q  # the key/value head this query head reads
        sink = inputs.sink
        parts = (inputs.q[batch, head, rows.start : rows.stop], inputs.k[batch, self.kv], inputs.v[batch, self.kv],
                 None if sink is None else sink.reshape(-1)[head : head + 1])  # fmt: skip
        self.leaves = tuple(None if x is None else x.detach().double().requires_grad_(grad) for x in parts)

    def outputs(self) -> tuple[Any, Any, Any, Any]:
        """O's rows, and each row's log-sum-exp, max score and sum of exponents, in fp64."""
        import torch

        config, inputs, (q, k, v, sink) = self.config, self.inputs, self.leaves
        rows = self.rows
        s = q @ k.transpose(0, 1) * config.scale
        cap = config.modifier.cap
        if cap is not None:
            s = cap * torch.tanh(s / cap)
        if inputs.bias is not None:
            bias = inputs.bias
            s = (
                s
                + bias[self.batch % bias.shape[0], self.head % bias.shape[1], rows.start : rows.stop].double()
            )
        i = torch.arange(rows.start, rows.stop, device=q.device).view(-1, 1)
        j = torch.arange(config.s_kv, device=q.device).view(1, -1)
        if config.alibi:
            s = s + (j - i).double() * slopes(config.h_q)[self.head]
        kept = _kept(config, self.batch, i, j)
        s = s.masked_fill(~kept, float("-inf"))
        if sink is not None:
            s = torch.cat([s, sink.view(1, 1).expand(s.shape[0], 1)], dim=1)
        some = kept.any(dim=1, keepdim=True)  # a row with no key (padding) gives 0, no NaN
        s = s.masked_fill(~some, 0.0)
        p = torch.softmax(s, dim=1).masked_fill(~some, 0.0)
        top = s.amax(dim=1, keepdim=True)
        total = (s - top).exp().sum(dim=1, keepdim=True)
        if sink is not None:
            p = p[:, :-1]
        if inputs.dropout_mask is not None:
            kept_drop = inputs.dropout_mask[self.batch, self.head, rows.start : rows.stop].double()
            p = p * kept_drop / (1.0 - config.dropout)
        return p @ v, top + total.log(), top, total


def _rows(config: SdpaConfig, backward: bool) -> int:
    """Query rows per block: its fp64 scores (and autograd's copies) within FP64_BLOCK_BYTES."""
    per_row = config.s_kv * 8 * (4 if backward else 2)
    return max(1, min(config.s_q, FP64_BLOCK_BYTES // per_row))


def _blocks(config: SdpaConfig, inputs: Any, backward: bool) -> Any:
    step = _rows(config, backward)
    for batch in range(config.b):
        for head in range(config.h_q):
            for r0 in range(0, config.s_q, step):
                between_chunks()
                yield _Block(config, inputs, batch, head, range(r0, min(r0 + step, config.s_q)), backward)


def forward_outputs(config: SdpaConfig, inputs: Any) -> dict[str, Any]:
    """O (b, h_q, s_q, d_v) and the softmax's row outputs (Stats, Max, SumExp) in fp64."""
    import torch

    device = inputs.q.device
    o = torch.zeros(config.o_dims, dtype=torch.float64, device=device)
    stats, top, total = (
        torch.zeros((*config.o_dims[:3], 1), dtype=torch.float64, device=device) for _ in range(3)
    )
    with torch.no_grad():
        for block in _blocks(config, inputs, False):
            at = (block.batch, block.head, slice(block.rows.start, block.rows.stop))
            o[at], stats[at], top[at], total[at] = block.outputs()
    return {"O": o, "Stats": stats, "Max": top, "SumExp": total}


def backward_outputs(config: SdpaConfig, inputs: Any) -> dict[str, Any]:
    """dQ, dK, dV (and dSink) in fp64: autograd of the fp64 forward for the output gradient dO."""
    import torch

    device = inputs.q.device
    dq, dk, dv = (torch.zeros(dims, dtype=torch.float64, device=device)
                  for dims in (config.q_dims, config.k_dims, config.v_dims))  # fmt: skip
    dsink = (
        None
        if inputs.sink is None
        else torch.zeros((1, config.h_q, 1, 1), dtype=torch.float64, device=device)
    )
    with torch.enable_grad():
        for block in _blocks(config, inputs, True):
            rows = slice(block.rows.start, block.rows.stop)
            d_o = inputs.d_o[block.batch, block.head, rows].double()
            leaves = [x for x in block.leaves if x is not None]
            grads = torch.autograd.grad((block.outputs()[0] * d_o).sum(), leaves)
            dq[block.batch, block.head, rows] += grads[0]
            dk[block.batch, block.kv] += grads[1]
            dv[block.batch, block.kv] += grads[2]
            if dsink is not None:
                dsink[0, block.head] += grads[3].view(1, 1)
    out = {"dQ": dq, "dK": dk, "dV": dv}
    return out if dsink is None else {**out, "dSink": dsink}


def fp64_reference(
    config: SdpaConfig, backward: bool, inputs: Any, names: tuple[str, ...]
) -> tuple[dict, str]:
    """The fp64 outputs of `names` (one pass's checked outputs) and ''; or {} and why not."""
    why = too_big(config, backward, getattr(inputs.q.device, "type", "cpu"))
    if why:
        return {}, why
    outputs = backward_outputs(config, inputs) if backward else forward_outputs(config, inputs)
    return {name: outputs[name] for name in names if name in outputs}, ""


def cross_check(
    got: Any, ref32: Any, ref64: Any, atol: float, rtol: float, rows: Any
) -> tuple[ErrorMetrics | None, ErrorMetrics]:
    """(the output against the fp64 reference, the fp32 reference against it), in the check's own
    tolerance and over its real rows; the first None where there is no output (CPU mode)."""
    mine = None if got is None else compare(got, ref64, atol, rtol, rows)
    return mine, compare(ref32, ref64, atol, rtol, rows)
