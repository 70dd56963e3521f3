"""The FP8 (E4M3) recipe, in one place: how inputs are quantised, which scale tensors a graph
reads, how output scales are set (delayed scaling) and what the kernel's amax is compared with.

As FP8 training stacks do it: q, k, v (and dO) are scaled per tensor by 448/amax before
rounding to E4M3, and the graph reads the inverse (descale) tensors; `scale_s` is
448·(1 - dropout), the bound of the softmax weights (the frontend recommends leaving Amax_S
virtual); outputs written in E4M3 get delayed scaling: one warm-up execution with scale 1, then
448 over the amax that execution wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.config import SdpaConfig
from ..model.results import Fp8Scaling
from ..model.tensor_plan import BACKWARD_AMAX
from .reference import torch_dtype

FP8_MAX = 448.0  # largest finite E4M3 value
FP8_RECIPE = (
    "per-tensor: q, k, v, dO scaled by 448/amax before rounding to E4M3; scale_s = 448·(1-dropout), the bound of "
    "the softmax weights; outputs (O, dQ, dK, dV, dP) by delayed scaling: one warm-up execution with scale 1, "
    "then 448/amax of its result"
)

# amax written -> (the scale it sets, the descale that undoes it, if the graph reads one)
FORWARD_DELAYED = {"amax_o": ("scale_o", None)}
BACKWARD_DELAYED = {
    "amax_dq": ("scale_dQ", None),
    "amax_dk": ("scale_dK", None),
    "amax_dv": ("scale_dV", None),
    "amax_dp": ("scale_dP", "descale_dP"),
}
# the scale each E4M3 output was written with, to read it back as the numbers it stands for
OUTPUT_SCALES = {"o": "scale_o", "dQ": "scale_dQ", "dK": "scale_dK", "dV": "scale_dV"}


def quantise(x: Any, fp8_max: float = FP8_MAX) -> tuple[Any, float]:
    """x scaled by fp8_max / amax(x) and rounded to E4M3, in x's layout, with the descale
    that turns it back (per-tensor scaling, as FP8 training recipes do)."""
    import torch

    amax = float(x.abs().max().item()) if x.numel() else 0.0
    scale = fp8_max / amax if amax > 0 else 1.0
    x8 = torch.empty_like(x, dtype=torch.float8_e4m3fn)
    x8.copy_(x * scale)
    return x8, 1.0 / scale


def dequantise(x8: Any, descale: Any) -> Any:
    """The fp32 values an FP8 tensor stands for: the values cuDNN computes with."""
    return x8.float() * descale


def scalar(value: float, device: str) -> Any:
    """A scale or amax tensor of an FP8 graph: fp32 (1, 1, 1, 1)."""
    import torch

    return torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=device)


def values(config: SdpaConfig, data: dict[str, Any], name: str) -> Any:
    """A device tensor as the numbers it stands for: FP8 inputs times their descale, FP8 outputs
    divided by the scale they were written with; anything else as it is."""
    t = data[name]
    if not config.fp8 or t.element_size() != 1:
        return t
    if name in OUTPUT_SCALES:
        return dequantise(t, 1.0 / data[OUTPUT_SCALES[name]])
    return dequantise(t, data[f"descale_{name}"])


def forward_scales(config: SdpaConfig, data: dict[str, Any], device: str) -> None:
    """Quantise q, k, v in `data` and add the forward's scale tensors and O's amax output."""
    for name in ("q", "k", "v"):
        data[name], descale = quantise(data[name])
        data[f"descale_{name}"] = scalar(descale, device)
    scale_s = FP8_MAX * (1.0 - config.dropout)  # the softmax weights' bound, after dropout's 1/(1-p)
    for name, value in (
        ("scale_s", scale_s),
        ("descale_s", 1.0 / scale_s),
        ("scale_o", 1.0),
        ("amax_o", 0.0),
    ):
        data[name] = scalar(value, device)


def backward_scales(config: SdpaConfig, data: dict[str, Any], d_o: Any, device: str) -> Any:
    """Add the backward's scale tensors and amax outputs to `data`; dO comes in O's dtype
    (quantised when O is E4M3). Returns dO as the graph reads it."""
    import torch

    descale = 1.0
    if config.o_dtype == "fp8_e4m3":
        d_o, descale = quantise(d_o)
    else:
        d_o = d_o.to(torch_dtype(torch, config.o_dtype))
    data["descale_dO"] = scalar(descale, device)
    data["descale_o"] = scalar(1.0 / float(data["scale_o"].item()), device)
    for name in ("scale_dQ", "scale_dK", "scale_dV", "scale_dP", "descale_dP"):
        data[name] = scalar(1.0, device)
    for name in BACKWARD_AMAX:
        data[name] = scalar(0.0, device)
    return d_o


def delayed_scaling(
    run: Callable[[], None], data: dict[str, Any], outputs: dict[str, tuple[str, str | None]]
) -> None:
    """FP8 outputs' scales from their amax: run once with scale 1, then set each scale to
    448/amax (and its descale to the inverse), so the next executions use E4M3's whole range."""
    import torch

    for scale, descale in outputs.values():
        data[scale].fill_(1.0)
        if descale:
            data[descale].fill_(1.0)
    run()
    torch.cuda.synchronize()
    for amax_name, (scale, descale) in outputs.items():
        amax = float(data[amax_name].item())
        value = FP8_MAX / amax if amax > 0 and amax == amax else 1.0
        data[scale].fill_(value)
        if descale:
            data[descale].fill_(1.0 / value)


def scaling(
    data: dict[str, Any], scales: tuple[str, ...], amax: tuple[str, ...], references: dict[str, Any]
) -> Fp8Scaling:
    """What a graph read and wrote: its scales, the amax it computed, and the reference's maxima."""
    return Fp8Scaling(
        recipe=FP8_RECIPE,
        scales={n: float(data[n].item()) for n in scales if n in data},
        amax={n: float(data[n].item()) for n in amax if n in data},
        reference_amax={n: float(r.abs().max().item()) for n, r in references.items() if r is not None},
    )
