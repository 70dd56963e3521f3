"""Kernel time without the host in it, in a named regime.

An event pair around one `execute()` measures the host too: the frontend's execute
costs 16-28 us of CPU time, so for small problems the GPU idles between the events and
the reading is mostly host. Instead we capture N executions in a CUDA graph, replay it,
and read the duration of each kernel from CUPTI (through the autograd profiler): kernel time
is the sum of a plan's kernel durations per execution. The timed replays are enqueued back
to back with an event between each two, and the host waits once, after the last: the GPU
never idles between samples. Each replay's wall time per execution is kept beside it
(`replay_us`, the flush's own kernels taken out): it adds the ~2 us gap a graph leaves
between kernels, and a larger disagreement with the kernel sum is reported. Host overhead
per `execute()` call is measured separately on the CPU clock.

At large shapes attention reaches the GPU's power limit and the clocks drop, so a figure
needs its regime. *Burst* (published tables): wait, capped, until the GPU is rested (no power
or thermal cap active, NVML's violation counters still), then a short warm-up and a short
run. *Sustained* (a training step): keep the plan running for a set time, then time it with
the load continuing. A measurement whose p90/p10 exceeds STABLE_RATIO is taken once more and,
if still unstable, said to be.

With `l2_flush`, each execution in the graph is preceded by a write over a buffer of
twice the L2 size, so the kernel starts cold, as a layer in a real model would; the
flush's own kernels are recognised by name and left out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ..model.options import TimingOptions
from ..model.results import TimingStats
from ..model.statuses import REGIME_BURST, REGIME_SUSTAINED

# p90/p10 above this is unstable. On a rested H200 the samples of one measurement spread by
# under 1% (warm L2, 5 µs to 0.5 ms); a clock that moves during the measurement (power capping
# took the 8k-context kernel from 1697 to 1908-1995 µs) spreads them by 10% or more. 3% sits
# between, and is the run-to-run agreement a figure must show to be repeated.
STABLE_RATIO = 1.03


def _percentile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(per_exec_us: list[float], per_replay: int, l2_flushed: bool, method: str) -> TimingStats:
    """The statistics of one measurement's samples (kept in replay order beside them)."""
    values = sorted(per_exec_us)
    p10, p90 = _percentile(values, 0.10), _percentile(values, 0.90)
    return TimingStats(
        median_us=statistics.median(values),
        min_us=values[0],
        max_us=values[-1],
        p10_us=p10,
        p90_us=p90,
        stdev_us=statistics.stdev(values) if len(values) > 1 else 0.0,
        replays=len(values),
        per_replay=per_replay,
        l2_flushed=l2_flushed,
        method=method,
        samples_us=tuple(per_exec_us),
        stable=(p90 <= p10 * STABLE_RATIO) if len(values) >= 5 and p10 > 0 else None,
    )


def cross_check(kernel_us: float, replay_us: float | None, kernels_per_call: int) -> str:
    """Replay time against the kernel sum, per execution: '' when they agree. A graph leaves
    a few µs between kernels (the H200 read 3.9 µs for the seed's one kernel); more than 5 µs a
    kernel (and 5%) means launch gaps, or work CUPTI did not attribute to the plan; less than the
    kernel sum means kernels the replay did not run."""
    if replay_us is None or kernel_us <= 0:
        return ""
    allowed = max(5.0 * kernels_per_call, 0.05 * kernel_us)
    if replay_us > kernel_us + allowed or replay_us < kernel_us - 0.05 * kernel_us:
        return (
            f"replay {replay_us:.2f} µs per execution against a kernel sum of {kernel_us:.2f} µs: "
            "launch gaps or GPU work not attributed to the plan's kernels"
        )
    return ""


def executions_per_replay(rough_us: float, opts: TimingOptions) -> int:
    """How many executions one replay runs: enough that a replay lasts about target_replay_ms
    (launch costs vanish), and, in a burst, few enough that all the timed replays fit in
    burst_ms (down to one execution a replay for long kernels)."""
    n = min(opts.max_per_replay, max(opts.min_per_replay, opts.target_replay_ms * 1000 / rough_us))
    if opts.regime == REGIME_BURST:
        n = min(n, max(1.0, opts.burst_ms * 1000 / (opts.replays * rough_us)))
    return int(n)


def kernel_time(
    run: Callable[[], None],
    set_stream: Callable[[int], None],
    opts: TimingOptions,
    l2_bytes: int | None = None,
    gpu: Any = None,
) -> TimingStats:
    """Kernel time of `run` (one execution), from CUPTI over CUDA-graph replays, in the regime
    `opts` names; an unstable measurement is taken once more.

    `set_stream(ptr)` points the cuDNN handle at the stream `run` must launch on; it is
    set to the capture stream while capturing and restored to torch's current stream after.
    `gpu` (telemetry.Nvml, None where NVML is absent) waits for a rested GPU and records
    clocks, power and capping around the measurement.
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
        per_replay = executions_per_replay(rough_us, opts)

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(per_replay):
                if flush_buf is not None:
                    flush_buf.zero_()
                run()
        flush_names = _kernel_names(lambda: flush_buf.zero_()) if flush_buf is not None else set()
        # under load, the profiler may also see the end of the load: the timed replays are the
        # last kernels it records, so count how many one execution launches
        per_call = len(_kernel_names(run, distinct=False)) if opts.regime == REGIME_SUSTAINED else None
        with torch.cuda.stream(stream):
            graph.replay()  # the first replay uploads the graph
            stream.synchronize()
            stats = retried_once(
                lambda: _measure(torch, graph, stream, opts, per_replay, flush_names, gpu, per_call)
            )
    finally:
        set_stream(torch.cuda.current_stream().cuda_stream)
    return dataclasses.replace(stats, l2_flush_bytes=flush_buf.numel() if flush_buf is not None else None)


def retried_once(measure: Callable[[], TimingStats]) -> TimingStats:
    """A measurement, taken once more if it was unstable; the second stands, unstable or not."""
    stats = measure()
    return dataclasses.replace(measure(), retried=True) if stats.stable is False else stats


def _measure(
    torch: Any,
    graph: Any,
    stream: Any,
    opts: TimingOptions,
    per_replay: int,
    flush_names: set[str],
    gpu: Any,
    per_call: int | None,
) -> TimingStats:
    """One measurement in the regime: rest or load the GPU, then the timed replays."""
    waited, rested = 0.0, None
    if opts.regime == REGIME_BURST:
        if gpu is not None:
            waited, rested = gpu.wait_until_rested(opts.rest_max_s)
        for _ in range(opts.warmup):  # a short warm-up after the rest: clocks up, caches as timed
            graph.replay()

    def timed() -> tuple[list[float], list[tuple[str, float, float]]]:
        if opts.regime == REGIME_SUSTAINED:
            _sustain(torch, graph, stream, opts.sustain_s)  # leaves work queued while CUPTI starts
        return _profiled_replays(torch, graph, stream, opts.replays)

    if gpu is not None:
        (replay_ms, records), telemetry = gpu.measure_around(timed)
        telemetry = dataclasses.replace(telemetry, rest_wait_s=waited, rested=rested)
    else:
        (replay_ms, records), telemetry = timed(), None
    stats = _stats(replay_ms, records, per_replay, opts, flush_names, per_call)
    return dataclasses.replace(stats, regime=opts.regime, telemetry=telemetry)


def _sustain(torch: Any, graph: Any, stream: Any, seconds: float) -> None:
    """Replay for `seconds`, waiting on the GPU only a batch at a time, and return with one more
    batch queued: the load goes on while the profiler starts."""
    batch = 8
    deadline = time.monotonic() + seconds
    while True:
        t0 = time.monotonic()
        for _ in range(batch):
            graph.replay()
        if time.monotonic() >= deadline:
            return  # the last batch still runs
        stream.synchronize()
        batch = min(batch * 2, 1024) if time.monotonic() - t0 < 0.05 else batch


def _stats(
    replay_ms: list[float],
    records: list[tuple[str, float, float]],
    per_replay: int,
    opts: TimingOptions,
    flush_names: set[str],
    per_call: int | None = None,
) -> TimingStats:
    """Samples from the kernel records (the plan's kernels, a replay's worth at a time) and the
    replays' own times, with the flush's kernels taken out of both. With `per_call` known, only
    the last replays' worth of records counts (earlier ones are the load's)."""
    records = sorted(records, key=lambda r: r[1])
    if per_call is not None:
        plan_records = [r for r in records if r[0] not in flush_names]
        records = [r for r in records if r[0] in flush_names][-opts.replays * per_replay :] + plan_records[
            -opts.replays * per_replay * per_call :
        ]
    kernels = [(start, dur) for name, start, dur in records if name not in flush_names]
    flush_us = sum(dur for name, _, dur in records if name in flush_names) / opts.replays
    replay_us = statistics.median(replay_ms) * 1000.0 / per_replay - flush_us / per_replay
    total = len(kernels)
    if total == 0 or total % opts.replays:
        # CUPTI recorded nothing usable (profiler unavailable): fall back to replay time
        if opts.l2_flush:
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
    per_call = max(1, round(per_group / per_replay))
    return dataclasses.replace(
        stats,
        replay_us=replay_us,
        kernels_per_call=per_call,
        cross_check=cross_check(stats.median_us, replay_us, per_call),
    )


def _profiled_replays(
    torch: Any, graph: Any, stream: Any, replays: int
) -> tuple[list[float], list[tuple[str, float, float]]]:
    """Replay `replays` times under CUPTI, back to back with an event between each two, and wait
    once: (each replay's time in ms, the kernel records)."""
    with cupti(torch) as prof:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
        events[0].record(stream)
        for i in range(replays):
            graph.replay()
            events[i + 1].record(stream)
        events[-1].synchronize()
        torch.cuda.synchronize()
    times = [events[i].elapsed_time(events[i + 1]) for i in range(replays)]
    return times, _kernel_records(torch, prof)


@contextlib.contextmanager
def cupti(torch: Any) -> Iterator[Any]:
    """Record the GPU's kernels (CUPTI, through Kineto) and nothing of the CPU's. This is the
    autograd profiler that torch.profiler.profile wraps, entered directly: the wrapper imports
    torch._inductor as every profile starts (to read one setting), which cost a fresh engine
    process 3.7 s at its first timing on the H200, or its fork server as much at each launch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.profiler.profile(use_device="cuda", use_cpu=False, use_kineto=True) as prof:
            yield prof


def _kernel_records(torch: Any, prof: Any) -> list[tuple[str, float, float]]:
    """(name, start µs, duration µs) of every GPU kernel the profiler saw, read from Kineto's own
    events: the profiler's function_events would first build a Python event tree of them all
    (a burst of small kernels records 4,000; that tree cost a check 0.4 s on the H200). The
    names are Kineto's as recorded, which is all that telling the flush from the plan needs."""
    out = []
    for evt in prof.kineto_results.events():
        if evt.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = evt.name() or ""
        if name.startswith(("Memcpy", "Memset", "[memory]")):
            continue
        out.append((name, evt.start_ns() / 1000.0, evt.duration_ns() / 1000.0))
    return out


def _kernel_names(fn: Callable[[], None], distinct: bool = True) -> Any:
    """Names of the kernels `fn` launches (to tell the L2 flush from the plan's kernels), or,
    not `distinct`, one name per kernel launched (to count them)."""
    import torch

    with cupti(torch) as prof:
        fn()
        torch.cuda.synchronize()
    names = [name for name, _, _ in _kernel_records(torch, prof)]
    return set(names) if distinct else names


HOST_OVERHEAD_GPU_S = 0.01  # the GPU time the host-overhead calls may queue, in all


def host_overhead_calls(kernel_us: float | None, most: int = 50, fewest: int = 5) -> int:
    """How many execute() calls the host overhead averages: `most`, fewer for long kernels so
    the calls queue about HOST_OVERHEAD_GPU_S of GPU work. The CPU time is read as the calls
    return, but the GPU must drain them before anything else is timed: 50 calls of the 32k
    context's 15 ms kernel held a check for 0.75 s, and back-to-back executions at full power
    cap the H200's clock, which the next burst then waits out."""
    if not kernel_us or kernel_us <= 0:
        return most
    return max(fewest, min(most, int(HOST_OVERHEAD_GPU_S * 1e6 / kernel_us)))


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
    """(kernel µs per call, kernels per call) as CUPTI records plain eager calls:
    the independent reading the engine's kernel time is checked against."""
    import torch

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with cupti(torch) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    records = _kernel_records(torch, prof)
    return sum(d for _, _, d in records) / calls, round(len(records) / calls)
