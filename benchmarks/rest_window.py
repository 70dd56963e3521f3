"""How long a burst measurement must rest after capped work: the burst regime's quiet window.

Each trial loads the GPU with the preset's own plan for --load-s seconds (at large shapes this
reaches the H200's power cap), then rests as the engine does (no cap reason left, and NVML's
violation counters still for the last quiet window), then times a burst. Windows are tried in
turns, so a drift of the machine falls on all of them. Reported per window: the wait it took and
the bursts' kernel times and capped shares. A window is long enough when its bursts read what
the longest window's read.

    python -m benchmarks.rest_window [--preset llama3-8b-prefill] [--windows 0.1,0.3,1.0] [--trials 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.figures import save


class LoadedPlan:
    """The preset's plan built on the GPU, with NVML open: load the GPU with it, then time a burst
    after the rest a `rest` callable gives (Nvml.wait_until_rested's face)."""

    def __init__(self, preset: str) -> None:
        import torch

        from tui.engine.runner import Engine
        from tui.model.options import RunOptions
        from tui.store.presets import find

        self.torch, self.engine, config = torch, Engine(), find(preset).config
        built = self.engine.run(config, RunOptions(autotune=False, check=False))
        if built.status != "ok":
            raise SystemExit(f"{preset}: {built.status}: {built.message}")
        self.run, self.gpu, self.env = (
            self.engine.executor(config),
            self.engine.gpu(),
            self.engine.environment(),
        )
        if self.gpu is None:
            raise SystemExit("NVML cannot be read here: no rest to measure")

    def load(self, seconds: float) -> None:
        """The plan back to back for `seconds`, waiting on the GPU every few executions."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for _ in range(16):
                self.run()
            self.torch.cuda.synchronize()

    def burst(self, rest: Callable[[float], tuple[float, bool | None]]) -> Any:
        """A burst's TimingStats, after `rest` instead of the engine's own wait."""
        from tui.engine.timing import kernel_time
        from tui.model.options import TimingOptions

        self.gpu.wait_until_rested = rest
        return kernel_time(self.run, self.engine._set_stream, TimingOptions(), self.env.l2_bytes, self.gpu)


def in_turns(values: list[float], trial: int) -> list[float]:
    """`values` started at a different one each trial: a drift of the machine falls on all."""
    return values[trial % len(values) :] + values[: trial % len(values)]


def loaded_plan_parser(description: str) -> argparse.ArgumentParser:
    """The options of a benchmark that loads the GPU with a preset's plan: the preset, trials of
    each setting compared, the load's length and where the figures go."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--preset", default="llama3-8b-prefill")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--load-s", type=float, default=2.0)
    parser.add_argument("--out", help="write the figures here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = loaded_plan_parser(__doc__.splitlines()[0])
    parser.add_argument("--windows", default="0.1,0.3,1.0", help="quiet windows to compare, in seconds")
    args = parser.parse_args(argv)
    from tui.engine.telemetry import Nvml

    plan = LoadedPlan(args.preset)
    gpu, env = plan.gpu, plan.env
    windows = [float(w) for w in args.windows.split(",")]
    rows = []
    for trial in range(args.trials):
        for quiet in in_turns(windows, trial):
            plan.load(args.load_s)
            stats = plan.burst(functools.partial(Nvml.wait_until_rested, gpu, quiet_s=quiet))
            t = stats.telemetry
            rows.append(
                {
                    "quiet_s": quiet,
                    "wait_s": round(t.rest_wait_s, 3),
                    "rested": t.rested,
                    "median_us": round(stats.median_us, 2),
                    "p90_over_p10": round(stats.p90_us / stats.p10_us, 4),
                    "power_capped_pct": t.power_capped_pct,
                    "sm_clock_mhz": t.before.sm_clock_mhz,
                }
            )
    summary = {}
    for quiet in windows:
        mine = [r for r in rows if r["quiet_s"] == quiet]
        summary[str(quiet)] = {
            "wait_s": statistics.median(r["wait_s"] for r in mine),
            "median_us": statistics.median(r["median_us"] for r in mine),
            "median_us_each": [r["median_us"] for r in mine],
            "power_capped_pct_each": [r["power_capped_pct"] for r in mine],
        }
    figures = {
        "preset": args.preset,
        "gpu": env.gpu_name,
        "load_s": args.load_s,
        "windows": summary,
        "rows": rows,
    }
    print(json.dumps(figures, indent=1))
    save(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
