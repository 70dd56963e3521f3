"""The input recipe (model/inputs.py) applied to the drawn tensors: the magnitudes it asks for,
the fill of every part no output may read, and the same parts zeroed again for the reference.

The fill goes where a correct kernel never looks: past each sequence's real length (a padding
mask), the page pool's slots past each sequence's real length and its spare pages (a paged
cache), the packed buffer past its real tokens (THD, storage.pack) and the gaps of padded
strides. With NaN there, an output that reads them shows it. The reference and the peers read
the real parts only: `real_parts` zeroes the rest of their logical inputs, so NaN in the padding
never reaches a sum of theirs (0 * NaN is NaN, and autograd multiplies padded rows by zero).
"""

from __future__ import annotations

import math
from typing import Any

from ..model.config import SdpaConfig
from ..model.inputs import NEAR_EQUAL_SPREAD, Recipe, recipe_of
from ..model.tensor_plan import PAGE_TABLES, is_packed

FILL_VALUES = {"nan": float("nan"), "zero": 0.0}
FP8_NAN = 0x7F  # E4M3's NaN, as a byte


def shaped(config: SdpaConfig, values: dict[str, Any]) -> None:
    """q and k of `values` (drawn, stored in their dtype) as the recipe asks, in place: computed in
    fp32 from the stored numbers and stored again. near-equal: each head's keys its first key
    plus 1/64 of their own draw; scale:X: q times X; shift:X: q and k share a component m along
    the first head-dim axis, m * m * attn_scale = |X|, so that every score moves by X."""
    r = recipe_of(config)
    if not r.magnitudes:
        return
    q, k = values["q"], values["k"]
    qf, kf = q.float(), k.float()
    if r.near_equal:
        kf = kf[:, :, :1] + kf * NEAR_EQUAL_SPREAD
    if r.scale != 1.0:
        qf = qf * r.scale
    if r.shift:
        m = shift_component(config, r)
        qf = qf.clone() if qf is q else qf
        kf = kf.clone() if kf is k else kf
        qf[..., 0] += math.copysign(m, r.shift)
        kf[..., 0] += m
    q.copy_(qf)
    k.copy_(kf)


def shift_component(config: SdpaConfig, recipe: Recipe) -> float:
    """The shared component of q and k that moves every score by the recipe's shift."""
    return math.sqrt(abs(recipe.shift) / config.scale)


def fill_value(recipe: Recipe) -> float:
    """What the unused parts hold: the recipe's fill, zeros in the gaps of padded strides without one."""
    return FILL_VALUES[recipe.pad] if recipe.pad else 0.0


def fill(t: Any, value: float) -> Any:
    """`t` (or a part of it) set to `value` (a fill: NaN or zero); E4M3's are bytes of their own."""
    import torch

    if t.element_size() == 1:
        t.view(torch.uint8).fill_(FP8_NAN if value != value else 0)
        return t
    return t.fill_(value)


def gaps_filled(t: Any, value: float) -> Any:
    """`t` in new memory of the same strides whose gaps (the elements no index reaches) hold `value`."""
    import torch

    size = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    memory = fill(torch.empty((size,), dtype=t.dtype, device=t.device), value)
    return memory.as_strided(t.shape, t.stride()).copy_(t)


def with_gaps(config: SdpaConfig, data: dict[str, Any], names: tuple[str, ...]) -> None:
    """The drawn tensors `names` moved into memory whose stride gaps hold the fill (padded strides)."""
    r = recipe_of(config)
    if r.gap:
        for name in names:
            if name in data:
                data[name] = gaps_filled(data[name], fill_value(r))


def _lengths(config: SdpaConfig, side: int) -> list[int]:
    return [config.lengths(i)[side] for i in range(config.b)]


def fill_unused(config: SdpaConfig, data: dict[str, Any], names: tuple[str, ...]) -> None:
    """With a fill, the parts of `names` (and the bias) no output may read set to it: rows past each
    sequence's real length of dense tensors; a pool's slots past each real length (its last page's
    tail and the spare pages the table points at past it). Packed buffers are filled as packed."""
    r = recipe_of(config)
    if r.pad is None or not config.padded:
        return
    value = fill_value(r)
    for name in names:
        side = 1 if name in ("k", "v") else 0 if name in ("q", "dO") else None
        if side is None or name not in data or is_packed(config, name):  # packed: filled when packed
            continue
        if config.paged and name in PAGE_TABLES:
            _fill_pages(config, data[name], data[PAGE_TABLES[name]], value)
            continue
        for i, n in enumerate(_lengths(config, side)):
            fill(data[name][i, :, n:], value)
    if "bias" in data and "bias" in names:
        _fill_bias(config, data["bias"], value)


def _fill_pages(config: SdpaConfig, pool: Any, table: Any, value: float) -> None:
    """Every pool slot a sequence's table row reaches past its real length."""
    import torch

    size = config.page_size or 1
    rows = table.view(config.b, -1)
    slots = torch.arange(rows.shape[1] * size, device=pool.device)
    target, value = (
        (pool.view(torch.uint8), FP8_NAN if value != value else 0)
        if pool.element_size() == 1
        else (pool, value)
    )
    for i, n in enumerate(_lengths(config, 1)):
        j = slots[n:]
        target[rows[i, j // size].long(), :, j % size] = value


def _fill_bias(config: SdpaConfig, bias: Any, value: float) -> None:
    """Bias entries outside the real (query, key) block of every batch entry they serve."""
    lq, lkv = _lengths(config, 0), _lengths(config, 1)
    for i in range(bias.shape[0]):
        rows, keys = (lq[i], lkv[i]) if bias.shape[0] > 1 else (max(lq), max(lkv))
        fill(bias[i, :, rows:], value)
        fill(bias[i, :, :rows, keys:], value)


def real_parts(config: SdpaConfig, q: Any, k: Any, v: Any, bias: Any, d_o: Any) -> tuple[Any, ...]:
    """The logical inputs with every part past the real lengths zeroed (with a fill only: the
    default recipe's numbers stay as drawn, to the bit)."""
    if recipe_of(config).pad is None or not config.padded:
        return q, k, v, bias, d_o
    import torch

    def real(t: Any, side: int) -> Any:
        if t is None:
            return None
        s = t.shape[2]
        lens = torch.tensor(_lengths(config, side), device=t.device).view(-1, 1, 1, 1)
        keep = torch.arange(s, device=t.device).view(1, 1, -1, 1) < lens
        return torch.where(keep, t, torch.zeros((), dtype=t.dtype, device=t.device))

    if bias is not None:
        bias = bias.clone()
        _fill_bias(config, bias, 0.0)
    return real(q, 0), real(k, 1), real(v, 1), bias, real(d_o, 0)
