"""Does the tool's kernel time agree with the profiler's?

For a small (~6 us), the seed (~28 us), a large (~0.5 ms) and an FP8 problem, and the
backward of two training steps, prints the
engine's kernel time (CUPTI over CUDA-graph replays), torch.profiler's kernel time for
plain eager execute() calls of the same plan, their ratio (target 0.95-1.05), the graph
replay's wall time per execution, the event-pair-per-launch reading the tool refuses
to use, and the host overhead of one execute() call.

With --regimes, the cases where the GPU's power state sets the figure (b=1, h=64/8, s=8k and
16k, d=128 bf16 causal): each in both regimes, with and without the L2 flush, three times,
against an independent loop of eager calls under the profiler run in the same regime (burst:
on a rested GPU, a few calls; sustained: after the same load). Targets: burst within 3% of
the loop every time; sustained repeating within 5% across its three runs, capping reported.

    python -m benchmarks.timing_fidelity [--regimes] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

from tui.engine.runner import Engine, RunOptions
from tui.engine.timing import profiler_kernel_time
from tui.model.config import SdpaConfig
from tui.model.options import TimingOptions
from tui.model.statuses import REGIME_BURST, REGIME_SUSTAINED, REGIMES
from tui.present.format import pass_short

CASES = {
    "small": SdpaConfig(b=1, h_q=8, h_kv=8, s_q=256, s_kv=256, d_qk=64, d_v=64, causal="none"),
    "seed": SdpaConfig(),
    "large": SdpaConfig(
        b=2, h_q=32, h_kv=8, s_q=4096, s_kv=4096, d_qk=128, d_v=128, dtype="bf16", causal="top_left"
    ),
    "fp8": SdpaConfig(
        b=2, h_q=16, h_kv=16, s_q=4096, s_kv=4096, d_qk=128, d_v=128, dtype="fp8_e4m3", causal="none"
    ),
    "seed+bwd": SdpaConfig(backward=True),
    "large+bwd": SdpaConfig(
        b=2, h_q=32, h_kv=8, s_q=4096, s_kv=4096, d_qk=128, d_v=128, dtype="bf16", backward=True
    ),
}


REGIME_CASES = {
    f"{s // 1024}k": SdpaConfig(
        b=1, h_q=64, h_kv=8, s_q=s, s_kv=s, d_qk=128, d_v=128, dtype="bf16", causal="top_left"
    )
    for s in (8192, 16384)
}
REPEATS = 3


def loop_us(run, regime: str, flush_bytes: int | None, engine: Engine, calls: int = 20) -> float:
    """The independent reading in a regime: median kernel time of eager calls under the profiler
    (the flush's kernels, when flushing, told apart by name), after a rest or after 2 s of load."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if flush_bytes else None
    flush_names = set()
    if flush is not None:
        with warnings.catch_warnings(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            warnings.simplefilter("ignore")
            flush.zero_()
            torch.cuda.synchronize()
        flush_names = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    gpu = engine.gpu()
    if regime == REGIME_BURST and gpu is not None:
        gpu.wait_until_rested(2.0)
    deadline = time.monotonic() + (2.0 if regime == REGIME_SUSTAINED else 0.0)
    while True:  # the load (sustained), or a three-call warm-up (burst)
        for _ in range(3):
            run()
        if time.monotonic() >= deadline:
            break
        torch.cuda.synchronize()
    per_call = []
    with warnings.catch_warnings(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        warnings.simplefilter("ignore")
        for _ in range(calls):
            if flush is not None:
                flush.zero_()
            run()
        torch.cuda.synchronize()
    kernels = [
        e
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and e.name not in flush_names
        and not (e.name or "").startswith(("Memcpy", "Memset", "[memory]"))
    ]
    kernels.sort(key=lambda e: e.time_range.start)
    per_group = max(1, len(kernels) // calls)
    for i in range(calls):
        per_call.append(sum(e.time_range.elapsed_us() for e in kernels[i * per_group : (i + 1) * per_group]))
    return statistics.median(per_call)


def regime_rows(engine: Engine, only: list[str] | None = None) -> list[dict]:
    """Each regime case, regime and flush setting, REPEATS times, beside the independent loop."""
    rows = []
    for name, config in REGIME_CASES.items():
        if only and name not in only:
            continue
        for regime in REGIMES:
            for flush in (False, True):
                for repeat in range(REPEATS):
                    timing = TimingOptions(replays=20, regime=regime, l2_flush=flush)
                    result = engine.run(config, RunOptions(autotune=False, check=False, timing=timing))
                    p = result.forward
                    if p is None or p.timing is None:
                        rows.append({"case": name, "status": result.status, "message": result.message})
                        continue
                    t = p.timing
                    loop = loop_us(engine.executor(config), regime, t.l2_flush_bytes, engine)
                    tel = t.telemetry
                    rows.append(
                        {
                            "case": name,
                            "regime": regime,
                            "l2": "flushed" if flush else "warm",
                            "repeat": repeat + 1,
                            "kernel_us": round(t.median_us, 1),
                            "p10_us": round(t.p10_us, 1),
                            "p90_us": round(t.p90_us, 1),
                            "stable": t.stable,
                            "retried": t.retried,
                            "loop_us": round(loop, 1),
                            "ratio": round(t.median_us / loop, 3) if loop else None,
                            "tflops": round(p.tflops or 0, 1),
                            "sm_mhz_after": tel.after.sm_clock_mhz if tel else None,
                            "power_w_after": tel.after.power_w if tel else None,
                            "power_capped_pct": tel.power_capped_pct if tel else None,
                            "rest_wait_s": round(tel.rest_wait_s, 2) if tel else None,
                            "cross_check": t.cross_check,
                        }
                    )
    return rows


def print_regimes(rows: list[dict]) -> None:
    print(
        f"{'case':5} {'regime':9} {'L2':7} {'#':>1} {'kernel us':>9} {'p10':>8} {'p90':>8} {'stable':>6} "
        f"{'loop us':>8} {'ratio':>6} {'TFLOPS':>7} {'SM MHz':>6} {'W':>6} {'capped%':>7} {'rest s':>6}"
    )
    for r in rows:
        if "regime" not in r:
            print(f"{r['case']:5} {r['status']}: {r['message']}")
            continue
        print(
            f"{r['case']:5} {r['regime']:9} {r['l2']:7} {r['repeat']:>1} {r['kernel_us']:>9} {r['p10_us']:>8} "
            f"{r['p90_us']:>8} {r['stable']!s:>6} {r['loop_us']:>8} {r['ratio']!s:>6} {r['tflops']:>7} "
            f"{r['sm_mhz_after']!s:>6} {r['power_w_after']!s:>6} {r['power_capped_pct']!s:>7} {r['rest_wait_s']!s:>6}"
        )


def event_pair_us(run, calls: int = 20) -> float:
    """The naive reading: events around each single execute() (what we do NOT report)."""
    import torch

    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    times.sort()
    return times[len(times) // 2]


def measure(name: str, config: SdpaConfig, engine: Engine) -> list[dict]:
    """One row a pass: the forward's, and with a backward one more for it."""
    result = engine.run(config, RunOptions(autotune=False, check=False, timing=TimingOptions(replays=30)))
    rows = []
    for p in result.passes:
        case = name if p.kind == "forward" else f"{name} {pass_short(p.kind)}"
        if p.timing is None:
            rows.append({"case": case, "status": p.status, "message": p.message})
        else:
            rows.append(_row(case, config, p, engine.executor(config, p.kind), engine))
    return rows or [{"case": name, "status": result.status, "message": result.message}]


def _row(name: str, config: SdpaConfig, p, run, engine: Engine) -> dict:
    """A measured pass beside the profiler's reading of plain eager calls of the same plan."""
    gpu = engine.gpu()
    if gpu is not None:  # the loop in the engine's default regime, burst: on a rested GPU
        gpu.wait_until_rested(2.0)
    prof_us, kernels = profiler_kernel_time(run, calls=30)
    return {
        "case": name,
        "config": config.label(),
        "plan": p.plan(p.heuristic_plan).name,
        "kernel_us": round(p.timing.median_us, 2),
        "graph_replay_us": round(p.timing.replay_us or 0, 2),
        "spread_pct": round(p.timing.spread_pct, 1),
        "profiler_us": round(prof_us, 2),
        "ratio": round(p.timing.median_us / prof_us, 3) if prof_us else None,  # target 0.95-1.05
        "kernels_per_call": kernels,
        "event_pair_us": round(event_pair_us(run), 2),
        "host_overhead_us": round(p.host_overhead_us or 0, 2),
        "tflops": round(p.tflops or 0, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--regimes", action="store_true", help="only the regime cases (8k, 16k)")
    parser.add_argument("--case", action="append", help="with --regimes: only this case (repeatable)")
    args = parser.parse_args()
    engine = Engine()
    env = engine.environment()
    if not env.gpu_available:
        raise SystemExit(f"needs a GPU: {env.unavailable_reason}")
    print(f"{env.gpu_name}, cuDNN {env.cudnn_backend_version}, torch {env.torch_version}, {env.telemetry}")
    if args.regimes:
        rows = regime_rows(engine, args.case)
        print_regimes(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=2)
        return
    rows = [row for name, cfg in CASES.items() for row in measure(name, cfg, engine)]
    head = (
        f"{'case':14} {'kernel us':>10} {'profiler us':>12} {'ratio':>6} {'replay us':>10} "
        f"{'event-pair us':>14} {'host us':>8} {'TFLOPS':>7}  plan"
    )
    print(head)
    for r in rows:
        if "ratio" not in r:
            print(f"{r['case']:14} {r['status']}: {r['message']}")
            continue
        print(
            f"{r['case']:14} {r['kernel_us']:>10} {r['profiler_us']:>12} {r['ratio']:>6} {r['graph_replay_us']:>10} "
            f"{r['event_pair_us']:>14} {r['host_overhead_us']:>8} {r['tflops']:>7}  {r['plan']}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
