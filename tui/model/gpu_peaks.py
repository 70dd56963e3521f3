"""What a GPU could do at best, by the name torch reports, so that a measured figure can be read
as a share of its peak: dense tensor-core throughput and memory bandwidth, and the roofline.

Every figure is NVIDIA's own, from the datasheet (or architecture whitepaper) named in `source`.
Datasheets quote tensor throughput *with 2:4 sparsity* (marked `*` there); attention's matmuls
are dense, so those figures are halved here. FP16 is with FP32 accumulation, as cuDNN's
attention accumulates: on GeForce cards that is half the FP16-accumulate rate a datasheet leads
with. A name matches an entry when it holds every one of the entry's tokens; the entry with the
most tokens wins (`NVIDIA A100 80GB PCIe` is the 80 GB PCIe card, not the SXM4 one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COMPUTE, MEMORY = "compute", "memory"  # what bounds a point on the roofline
_FP8_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
_HALF_DTYPES = ("fp16", "bf16")


@dataclass(frozen=True)
class Peak:
    """One GPU's dense peaks: tensor TFLOPS in fp16/bf16 and fp8 (None: no fp8), memory TB/s."""

    name: str  # the product, as NVIDIA names it
    tokens: tuple[str, ...]  # what a reported name must hold, lower case
    fp16_tflops: float
    fp8_tflops: float | None
    bandwidth_tbs: float
    source: str

    def tflops(self, dtype: str) -> float | None:
        """The dense tensor peak for inputs of `dtype` (fp16, bf16, fp8 or fp8_e4m3)."""
        if dtype in _HALF_DTYPES:
            return self.fp16_tflops
        if dtype in _FP8_DTYPES:
            return self.fp8_tflops
        raise ValueError(f"no tensor peak for dtype {dtype!r} (use fp16, bf16 or fp8)")


_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
_GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_ADA = "NVIDIA Ada GPU architecture whitepaper, appendix (FP16/FP8 with FP32 accumulate)"

# (name, tokens, fp16/bf16 dense TFLOPS, fp8 dense TFLOPS, TB/s, source); the datasheets' sparse
# figures are in the comments, halved in the numbers.
PEAKS: tuple[Peak, ...] = tuple(
    Peak(*row)
    for row in (
        # Hopper: 1,979* / 3,958* (SXM), 1,513* / 3,026* (PCIe), 1,671* / 3,341* (NVL)
        ("H100 SXM", ("h100",), 989.5, 1979.0, 3.35, _H100),
        ("H100 PCIe", ("h100", "pcie"), 756.5, 1513.0, 2.0, _H100),
        ("H100 NVL", ("h100", "nvl"), 835.5, 1670.5, 3.9, _H100),
        ("H200 SXM", ("h200",), 989.5, 1979.0, 4.8, _H200),
        ("H200 NVL", ("h200", "nvl"), 835.5, 1670.5, 4.8, _H200),
        # GH200: the Hopper of the superchip, 1,979* / 3,958*; 96 GB HBM3 (the "480GB" board,
        # named after its LPDDR5X) at 4 TB/s, 144 GB HBM3e at 4.9 TB/s
        ("GH200 (96 GB HBM3)", ("gh200",), 989.5, 1979.0, 4.0, _GH200),
        ("GH200 (144 GB HBM3e)", ("gh200", "hbm3e"), 989.5, 1979.0, 4.9, _GH200),
        # Blackwell: HGX B200 per GPU 4.5* / 9* PFLOPS; GB200 NVL72 per GPU 5* / 10* PFLOPS
        ("B200", ("b200",), 2250.0, 4500.0, 8.0, "NVIDIA HGX B200 datasheet (per GPU)"),
        ("GB200", ("gb200",), 2500.0, 5000.0, 8.0, "NVIDIA GB200 NVL72 datasheet (per GPU)"),
        # Ampere: 624* in every A100; no fp8
        ("A100 SXM4 40GB", ("a100",), 312.0, None, 1.555, _A100),
        ("A100 SXM4 80GB", ("a100", "80gb"), 312.0, None, 2.039, _A100),
        ("A100 PCIe 40GB", ("a100", "pcie"), 312.0, None, 1.555, _A100),
        ("A100 PCIe 80GB", ("a100", "pcie", "80gb"), 312.0, None, 1.935, _A100),
        ("A10", ("a10",), 125.0, None, 0.6, "NVIDIA A10 Tensor Core GPU datasheet (250*)"),
        # Ada: L40S 362.05 | 733* / 733 | 1,466*; L40 181.05 | 362.1* / 362 | 724* (both datasheets
        # give the dense figure too); L4 242* / 485*
        ("L40S", ("l40s",), 362.05, 733.0, 0.864, "NVIDIA L40S datasheet"),
        ("L40", ("l40",), 181.05, 362.0, 0.864, "NVIDIA L40 datasheet"),
        ("L4", ("l4",), 121.0, 242.5, 0.3, "NVIDIA L4 Tensor Core GPU datasheet"),
        ("RTX 6000 Ada Generation", ("rtx", "6000", "ada"), 364.2, 728.5, 0.96, _ADA),
        ("GeForce RTX 4090", ("rtx", "4090"), 165.2, 330.3, 1.008, _ADA),
    )
)


def _tokens(gpu_name: str) -> set[str]:
    """'NVIDIA A100-SXM4-80GB' -> {'nvidia', 'a100', 'sxm4', '80gb'}."""
    return set(re.findall(r"[a-z0-9]+", gpu_name.lower()))


def peak_for(gpu_name: str) -> Peak | None:
    """The entry of the GPU torch names so (None: not in the table). Tokens match whole, so an
    A10G is not an A10 and an L40S not an L40."""
    held = _tokens(gpu_name or "")
    matches = [p for p in PEAKS if held.issuperset(p.tokens)]
    return max(matches, key=lambda p: len(p.tokens), default=None)


@dataclass(frozen=True)
class Roofline:
    """Where one measured pass stands against its GPU's peaks."""

    intensity: float  # FLOP per byte of minimum traffic
    ridge: float  # the intensity at which the peak throughput needs all the bandwidth
    bound: str  # COMPUTE at or above the ridge, else MEMORY
    peak_tflops: float
    peak_tbs: float
    attainable_tflops: float  # min(peak, intensity x bandwidth)
    share: float | None  # the measured figure over the bounding peak (None: not measured)


def roofline(
    flops: float,
    io_bytes: float,
    dtype: str,
    peak: Peak,
    tflops: float | None = None,
    bandwidth_gbs: float | None = None,
) -> Roofline | None:
    """The roofline of a pass of `flops` over `io_bytes` on `peak`; None where the GPU has no
    tensor peak for the dtype or nothing is counted. Compute-bound: the share is the measured
    TFLOPS over the peak TFLOPS; memory-bound: the measured bandwidth over the peak bandwidth."""
    peak_tflops = peak.tflops(dtype)
    if peak_tflops is None or flops <= 0 or io_bytes <= 0:
        return None
    intensity = flops / io_bytes
    ridge = peak_tflops / peak.bandwidth_tbs  # TFLOP/s over TB/s: FLOP per byte
    bound = COMPUTE if intensity >= ridge else MEMORY
    if bound == COMPUTE:
        share = None if tflops is None else tflops / peak_tflops
    else:
        share = None if bandwidth_gbs is None else bandwidth_gbs / (peak.bandwidth_tbs * 1000)
    attainable = min(peak_tflops, intensity * peak.bandwidth_tbs)
    return Roofline(intensity, ridge, bound, peak_tflops, peak.bandwidth_tbs, attainable, share)
