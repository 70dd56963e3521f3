"""Kernel time without the host in it.

An event pair around one `execute()` measures the host too: the frontend's execute
costs 16-28 us of CPU time, so for small problems the GPU idles between the events and
the reading is mostly host. Instead we capture N executions in a CUDA graph, replay it,
and read the duration of each kernel from CUPTI (through torch.profiler): kernel time
is the sum of a plan's kernel durations per execution. The replay's own wall time per
execution is kept beside it (`replay_us`): it adds the ~2 us gap a graph leaves between
kernels, which matters for tiny problems. Host overhead per `execute()` call is measured
separately on the CPU clock.

With `l2_flush`, each execution in the graph is preceded by a write over a buffer of
twice the L2 size, so the kernel starts cold, as a layer in a real model would; the
flush's own kernels are recognised by name and left out.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .results import TimingStats


@dataclass(frozen=True)
class TimingOptions:
    replays: int = 20  # timed replays of the graph; the statistics are over these
    target_replay_ms: float = 2.0  # choose executions per replay so one replay lasts about this
    max_per_replay: int = 200
    min_per_replay: int = 3
    warmup: int = 3
    l2_flush: bool = False


def _percentile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(per_exec_us: list[float], per_replay: int, l2_flushed: bool, method: str) -> TimingStats:
    values = sorted(per_exec_us)
    return TimingStats(
        median_us=statistics.median(values),
        min_us=values[0],
        max_us=values[-1],
        p10_us=_percentile(values, 0.10),
        p90_us=_percentile(values, 0.90),
        stdev_us=statistics.stdev(values) if len(values) > 1 else 0.0,
        replays=len(values),
        per_replay=per_replay,
        l2_flushed=l2_flushed,
        method=method,
    )


def kernel_time(
    run: Callable[[], None],
    set_stream: Callable[[int], None],
    opts: TimingOptions,
    l2_bytes: int | None = None,
) -> TimingStats:
    """Kernel time of `run` (one execution), from CUPTI over CUDA-graph replays.

    `set_stream(ptr)` points the cuDNN handle at the stream `run` must launch on; it is
    set to the capture stream while capturing and restored to torch's current stream after.
    """
    import torch

    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    flush_buf = None
    if opts.l2_flush:
        flush_buf = torch.empty(max(2 * (l2_bytes or 64 << 20), 1 << 20), dtype=torch.uint8, device="cuda")
    try:
        set_stream(stream.cuda_stream)
        with torch.cuda.stream(stream):
            for _ in range(opts.warmup):
                run()
            # a rough per-call figure only to size the graph (it includes host gaps)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(5):
                run()
            end.record(stream)
        end.synchronize()
        rough_us = max(start.elapsed_time(end) * 1000.0 / 5, 1.0)
        per_replay = int(
            min(opts.max_per_replay, max(opts.min_per_replay, opts.target_replay_ms * 1000 / rough_us))
        )

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(per_replay):
                if flush_buf is not None:
                    flush_buf.zero_()
                run()
        flush_names = _kernel_names(lambda: flush_buf.zero_()) if flush_buf is not None else set()
        with torch.cuda.stream(stream):
            graph.replay()  # the first replay uploads the graph
            stream.synchronize()
            replay_ms, kernels = _profiled_replays(torch, graph, stream, opts.replays)
        del graph
    finally:
        set_stream(torch.cuda.current_stream().cuda_stream)
    kernels = [(start, dur) for name, start, dur in kernels if name not in flush_names]
    replay_us = None if flush_buf is not None else statistics.median(replay_ms) * 1000.0 / per_replay
    total = len(kernels)
    if total == 0 or total % opts.replays:
        # CUPTI recorded nothing usable (profiler unavailable): fall back to replay time
        if flush_buf is not None:
            raise RuntimeError("kernel time with L2 flush needs CUPTI kernel records, and none were recorded")
        per_exec = [t * 1000.0 / per_replay for t in replay_ms]
        stats = summarize(per_exec, per_replay, False, "cuda-graph replay (no CUPTI records)")
        return dataclasses.replace(stats, replay_us=replay_us)
    kernels.sort()
    per_group = total // opts.replays
    per_exec = [
        sum(d for _, d in kernels[i * per_group : (i + 1) * per_group]) / per_replay
        for i in range(opts.replays)
    ]
    stats = summarize(per_exec, per_replay, opts.l2_flush, "cupti kernel durations over cuda-graph replay")
    return dataclasses.replace(
        stats, replay_us=replay_us, kernels_per_call=max(1, round(per_group / per_replay))
    )


def _profiled_replays(
    torch: Any, graph: Any, stream: Any, replays: int
) -> tuple[list[float], list[tuple[str, float, float]]]:
    """Replay `replays` times under CUPTI: (event time of each replay in ms, kernel records)."""
    from torch.profiler import ProfilerActivity, profile

    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                times.append(_time_replay(torch, graph, stream))
            torch.cuda.synchronize()
        return times, _kernel_records(torch, prof)


def _kernel_records(torch: Any, prof: Any) -> list[tuple[str, float, float]]:
    """(name, start µs, duration µs) of every GPU kernel the profiler saw."""
    out = []
    for evt in prof.events():
        if getattr(evt, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        name = evt.name or ""
        if name.startswith(("Memcpy", "Memset", "[memory]")):
            continue
        out.append((name, float(evt.time_range.start), float(evt.time_range.elapsed_us())))
    return out


def _kernel_names(fn: Callable[[], None]) -> set[str]:
    """Names of the kernels `fn` launches (to tell the L2 flush from the plan's kernels)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return {name for name, _, _ in _kernel_records(torch, prof)}


def _time_replay(torch: Any, graph: Any, stream: Any) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    graph.replay()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)  # ms


def host_overhead_us(run: Callable[[], None], calls: int = 50) -> float:
    """CPU time of one `execute()` call: what a framework pays per layer before the GPU starts."""
    import torch

    torch.cuda.synchronize()
    run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        run()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed * 1e6 / calls


def profiler_kernel_time(run: Callable[[], None], calls: int = 20) -> tuple[float, int]:
    """(kernel µs per call, kernels per call) as torch.profiler records plain eager calls:
    the independent reading the engine's kernel time is checked against."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                run()
            torch.cuda.synchronize()
        records = _kernel_records(torch, prof)
    return sum(d for _, _, d in records) / calls, round(len(records) / calls)
