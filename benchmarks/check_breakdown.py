"""Where a `check`'s time goes: the whole command launched twice (the second on the plan cache the
first filled), then every case run in one process as `check` runs it (the same cases, options and
engine), its time put in parts.

    python -m benchmarks.check_breakdown [--quick] [--no-launch] [--out result.json]

Parts (a part's time excludes the parts it calls; what none of them covers is "other", which is
also where the first use of a module in the process lands when no part is open):
  build           the pass built: its plans loaded from the plan cache or planned and compiled,
                  its tensors allocated, FP8 scales set (Engine._built)
  rest waits      a burst waiting for counters that stand still (telemetry.Nvml.wait_until_rested)
  timed replays   capturing and replaying the plan under the profiler (timing.kernel_time)
  references      the fp32 reference and each output's tolerance (Measurement.prepare_check)
  output checks   comparing outputs with the reference (Measurement.check)
  host overhead   the CPU cost of execute(), which waits for its executions (timing.host_overhead_us)
Per case: its wall time and each part's. Target (issue 15, not a test): a warm check in at most
20 s on the H200.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from benchmarks.figures import save


class Parts:
    """Seconds spent in each named part; time in a part called from another counts to the inner."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._open: list[list[Any]] = []  # [part, seconds of inner parts]
        self._clock = clock

    def wrap(self, owner: Any, name: str, part: str) -> None:
        fn = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = self._clock()
            self._open.append([part, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                _, inner = self._open.pop()
                spent = self._clock() - t0
                self.totals[part] += spent - inner
                if self._open:
                    self._open[-1][1] += spent

        setattr(owner, name, timed)


def instrumented() -> Parts:
    from tui.engine import measure, runner, telemetry

    parts = Parts()
    parts.wrap(runner.Engine, "_built", "build")
    parts.wrap(telemetry.Nvml, "wait_until_rested", "rest waits")
    parts.wrap(measure, "kernel_time", "timed replays")
    parts.wrap(measure.Measurement, "prepare_check", "references")
    parts.wrap(measure.Measurement, "check", "output checks")
    parts.wrap(measure, "host_overhead_us", "host overhead")
    return parts


def in_one_process(quick: bool) -> dict[str, Any]:
    """Every case through one Engine, as `check` runs them; each case's wall time and parts."""
    from tui.cli.check import check_cases
    from tui.cli.options import preset_regimes
    from tui.engine.runner import Engine
    from tui.jobs.check import QUICK_REPLAYS, SMOKE, SMOKE_CASES
    from tui.model.options import options_from
    from tui.model.statuses import REGIME_BURST

    parts = instrumented()
    t0 = time.perf_counter()
    engine = Engine()
    env = engine.environment()
    start_s = time.perf_counter() - t0
    regimes = preset_regimes()
    cases = [(SMOKE, c) for c in SMOKE_CASES] if quick else check_cases(())
    replays = QUICK_REPLAYS if quick else 20
    rows = []
    for name, config in cases:
        options = options_from(
            {"replays": replays, "regime": regimes.get(name) or REGIME_BURST, "autotune": False,
             "check": env.gpu_available}
        )  # fmt: skip
        before, t = dict(parts.totals), time.perf_counter()
        result = engine.run(config, options)
        wall = time.perf_counter() - t
        spent = {p: round(parts.totals[p] - before.get(p, 0.0), 3) for p in parts.totals}
        spent = {p: s for p, s in spent.items() if s > 0}
        spent["other"] = round(wall - sum(spent.values()), 3)
        rows.append(
            {
                "case": name,
                "label": config.label(),
                "status": result.status,
                "wall_s": round(wall, 3),
                **spent,
            }
        )
    cases_s = sum(r["wall_s"] for r in rows)
    totals = {p: round(s, 2) for p, s in sorted(parts.totals.items(), key=lambda kv: -kv[1])}
    totals["other"] = round(cases_s - sum(parts.totals.values()), 2)
    return {
        "engine_start_s": round(start_s, 2),
        "cases_s": round(cases_s, 2),
        "parts_s": totals,
        "cases": rows,
    }


def launched(quick: bool, times: int) -> list[dict[str, Any]]:
    """`check` as a user types it, each a fresh launch: its wall time and its last line."""
    runs = []
    for _ in range(times):
        cmd = [sys.executable, "-m", "tui", "check", *(["--quick"] if quick else [])]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        runs.append(
            {
                "wall_s": round(time.perf_counter() - t0, 2),
                "exit": done.returncode,
                "last": lines[-1] if lines else "",
            }
        )
    return runs


def main(argv: list[str] | None = None, say: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smoke set only, as check --quick")
    parser.add_argument("--no-launch", action="store_true", help="skip the two launches of the whole command")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {}
    if not args.no_launch:
        figures["launches"] = launched(args.quick, 2)
    figures["in_one_process"] = in_one_process(args.quick)
    one = figures["in_one_process"]
    for run in figures.get("launches", []):
        say(f"check launched: {run['wall_s']} s (exit {run['exit']}): {run['last']}")
    say(f"in one process: engine start {one['engine_start_s']} s, cases {one['cases_s']} s")
    for part, seconds in one["parts_s"].items():
        share = 100 * seconds / one["cases_s"] if one["cases_s"] else 0.0
        say(f"  {part:15} {seconds:7.2f} s  {share:4.0f}%")
    slowest = sorted(one["cases"], key=lambda r: -r["wall_s"])[:5]
    say("slowest cases: " + ", ".join(f"{r['case']} {r['wall_s']} s" for r in slowest))
    if figures.get("launches"):
        figures["warm_check_s"] = figures["launches"][-1]["wall_s"]
        figures["median_case_s"] = statistics.median(r["wall_s"] for r in one["cases"])
    save(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
