"""An independent kernel-time reading, for the peers' loops (fa4_loop.py, flashinfer_loop.py):
torch.profiler's CUPTI kernel records of N eager calls, each after a write over twice the L2
(the flush's kernels known by name and left out), the median of the calls' kernel sums. It
imports nothing of the project, so it can stand beside the tool's own figure."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def kernel_records(torch, fn: Callable[[], object]) -> list[tuple[str, float, float]]:
    """(name, start µs, duration µs) of every GPU kernel `fn` launched, by CUPTI."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [
        (e.name, e.time_range.start, e.time_range.elapsed_us())
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))
    ]


def median_kernel_us(torch, call: Callable[[], object], calls: int) -> tuple[float, int]:
    """(median kernel µs of `calls` calls of `call` with the L2 flushed before each, kernels a call);
    `call` has run once already (its compile or plan apart)."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    flush_names = {name for name, _, _ in kernel_records(torch, flush.zero_)}
    per_call = len([r for r in kernel_records(torch, call) if r[0] not in flush_names])
    for _ in range(5):
        call()

    def timed() -> None:
        for _ in range(calls):
            flush.zero_()
            call()

    records = sorted((r for r in kernel_records(torch, timed) if r[0] not in flush_names), key=lambda r: r[1])
    if per_call == 0 or len(records) != per_call * calls:
        raise RuntimeError(f"CUPTI recorded {len(records)} kernels for {calls} calls of {per_call}")
    sums = [sum(r[2] for r in records[i * per_call : (i + 1) * per_call]) for i in range(calls)]
    return statistics.median(sums), per_call
