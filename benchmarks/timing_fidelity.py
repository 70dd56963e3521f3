"""Does the tool's kernel time agree with the profiler's?

For a small (~6 us), the seed (~28 us), a large (~0.5 ms) and an FP8 problem, and the
backward of two training steps, prints the
engine's kernel time (CUPTI over CUDA-graph replays), torch.profiler's kernel time for
plain eager execute() calls of the same plan, their ratio (target 0.95-1.05), the graph
replay's wall time per execution, the event-pair-per-launch reading the tool refuses
to use, and the host overhead of one execute() call.

    python -m benchmarks.timing_fidelity [--json OUT]
"""

from __future__ import annotations

import argparse
import json

from tui.engine.config import SdpaConfig
from tui.engine.runner import Engine, RunOptions
from tui.engine.timing import TimingOptions, profiler_kernel_time
from tui.format import pass_short

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
            rows.append(_row(case, config, p, engine.executor(config, p.kind)))
    return rows or [{"case": name, "status": result.status, "message": result.message}]


def _row(name: str, config: SdpaConfig, p, run) -> dict:
    """A measured pass beside the profiler's reading of plain eager calls of the same plan."""
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
    args = parser.parse_args()
    engine = Engine()
    env = engine.environment()
    if not env.gpu_available:
        raise SystemExit(f"needs a GPU: {env.unavailable_reason}")
    rows = [row for name, cfg in CASES.items() for row in measure(name, cfg, engine)]
    print(f"{env.gpu_name}, cuDNN {env.cudnn_backend_version}, torch {env.torch_version}")
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
