"""The score modifiers (model/variants.py) in torch: the one score function the fp32 reference
applies (reference.py: the cap in block_scores, the mask in keep_mask) and FlexAttention's
score_mod and mask_mod are made of (peers.py), so the check and the peer compute one thing.

The order is cuDNN's: the scores are scaled, the modifier caps them, then the bias is added and
the modifier's mask (with every other mask) sets -inf. Indices are broadcastable integer tensors:
a block's rows and keys for the reference, Flex's scalar q_idx and kv_idx for its compiled kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.variants import Variant


def capped(v: Variant, scores: Any) -> Any:
    """The softcap of scaled scores: cap * tanh(scores / cap); the scores as they are without one."""
    import torch

    return scores if v.cap is None else v.cap * torch.tanh(scores / v.cap)


def document_of(v: Variant, index: Any) -> Any:
    """Each position's document number: how many document starts after the first it has reached."""
    doc = index * 0
    for start in v.starts[1:]:
        doc = doc + (index >= start).to(index.dtype)
    return doc


def keeps(v: Variant, i: Any, j: Any) -> Any:
    """True where query i keeps key j under the variant's mask (top-left causal, a window of W
    keys back, a bidirectional prefix of P keys, documents that see only themselves)."""
    kept = j <= i
    if v.window:
        kept = kept & (j > i - v.window)
    if v.prefix is not None:
        kept = kept | (j < v.prefix)
    if len(v.documents) > 1:
        kept = kept & (document_of(v, i) == document_of(v, j))
    return kept


def flex_mask_mod(v: Variant) -> Callable[..., Any]:
    """FlexAttention's mask_mod of the variant's mask (only for a variant that masks)."""

    def mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return keeps(v, q_idx, kv_idx)

    return mask


def flex_score_mod(v: Variant, then: Callable[..., Any] | None = None) -> Callable[..., Any] | None:
    """FlexAttention's score_mod: the variant's cap of the scaled score, then `then` (ALiBi and the
    bias) as cuDNN adds them after it; `then` alone where the variant caps nothing."""
    if v.cap is None:
        return then

    def score(s: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        s = capped(v, s)
        return s if then is None else then(s, b, h, q_idx, kv_idx)

    return score
