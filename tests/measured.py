"""Recorded results (tests/fakes.py, schema 1.x: no regime, no samples, no telemetry) made over
as schema 2.1 records a measurement: each timed plan's samples in replay order, its regime and
verdict, and the GPU around it, as the H200 gave them under sustained load (DESIGN.md fact 11).
"""

from __future__ import annotations

import dataclasses

from tui.engine.timing import summarize
from tui.model.results import GpuState, RunResult, Telemetry, TimingStats

REST = GpuState(sm_clock_mhz=1980, mem_clock_mhz=3201, power_w=121.0, power_limit_w=700.0, temperature_c=38)
CAPPED = Telemetry(
    before=REST,
    after=dataclasses.replace(
        REST, sm_clock_mhz=1755, power_w=699.0, temperature_c=61, reasons=("sw power cap",)
    ),
    seconds=2.1,
    power_capped_pct=38.2,
    thermal_capped_pct=0.0,
    rest_wait_s=0.4,
    rested=True,
)
GAPS = (
    "replay 30.10 µs per execution against a kernel sum of 26.78 µs: launch gaps or GPU work not attributed"
)
NO_NVML = "NVML unavailable: Driver Not Loaded"


def two_clusters(median: float, n: int = 20) -> tuple[float, ...]:
    """A clock that moved mid-measurement: replays alternate 3% fast and 5% slow (p90/p10 1.082)."""
    return tuple(median * (0.97 if i % 2 else 1.05) for i in range(n))


def tight(median: float, n: int = 20) -> tuple[float, ...]:
    """A rested GPU: every replay within 0.4% of the median."""
    return tuple(median * (1 + 0.002 * ((i * 7) % 5 - 2)) for i in range(n))


def remeasured(
    t: TimingStats, samples: tuple[float, ...], regime: str, telemetry: Telemetry | None, **changes
) -> TimingStats:
    """`t` as the engine would have summarised `samples` (engine.timing.summarize), in `regime`."""
    stats = summarize(list(samples), t.per_replay, t.l2_flushed, t.method)
    return dataclasses.replace(stats, replay_us=t.replay_us, kernels_per_call=t.kernels_per_call,
                               regime=regime, telemetry=telemetry, **changes)  # fmt: skip


def measured(
    result: RunResult,
    regime: str = "sustained",
    telemetry: Telemetry | None = CAPPED,
    unstable: tuple[str, ...] = ("forward",),
    environment_telemetry: str = "NVML, driver 580.95",
) -> RunResult:
    """`result` with every timed plan measured in `regime`: the heuristic's pick of each pass in
    `unstable` gave two clusters (retried, still unstable) and its replay disagreed with the kernel
    sum; every other plan held still. Each pass's figure is its heuristic plan's."""
    passes = []
    for ps in result.passes:
        plans = []
        for p in ps.plans:
            if p.timing is not None:
                odd = p.is_heuristic_pick and ps.kind in unstable
                samples = (two_clusters if odd else tight)(p.timing.median_us)
                extra = {"retried": True, "cross_check": GAPS} if odd else {}
                p = dataclasses.replace(p, timing=remeasured(p.timing, samples, regime, telemetry, **extra))
            plans.append(p)
        pick = next((p for p in plans if p.index == ps.heuristic_plan), None)
        passes.append(dataclasses.replace(ps, plans=tuple(plans), timing=pick.timing if pick else ps.timing))
    env = dataclasses.replace(result.environment, telemetry=environment_telemetry)
    return dataclasses.replace(result, passes=tuple(passes), environment=env)


def flushed(result: RunResult, flush_bytes: int = 100 << 20) -> RunResult:
    """`result` with the L2 flushed before every execution of every timed plan."""

    def flush(t: TimingStats | None) -> TimingStats | None:
        return t and dataclasses.replace(t, l2_flushed=True, l2_flush_bytes=flush_bytes)

    passes = tuple(
        dataclasses.replace(ps, timing=flush(ps.timing),
                            plans=tuple(dataclasses.replace(p, timing=flush(p.timing)) for p in ps.plans))
        for ps in result.passes
    )  # fmt: skip
    return dataclasses.replace(result, passes=passes)
