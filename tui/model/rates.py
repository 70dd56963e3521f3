"""What a kernel time means in throughput: TFLOPS from a pass's FLOPs, GB/s from its bytes."""

from __future__ import annotations


def tflops(flops: int, median_us: float) -> float | None:
    return flops / (median_us * 1e-6) / 1e12 if median_us > 0 else None


def bandwidth_gbs(io_bytes: int, median_us: float) -> float | None:
    return io_bytes / (median_us * 1e-6) / 1e9 if median_us > 0 else None
