"""What NVML says while a capped GPU rests, and what a burst reads after a fixed rest: the data a
rest criterion with less lag than the violation counters would be designed from.

The burst regime waits until no cap reason is active and the violation counters have stood still
for a quiet window (telemetry.Nvml.wait_until_rested). On the H200 those stop about 0.35 s after
a capped load ends, while the clock is back within 0.1 s. This records, after the preset's own
plan has loaded the GPU for --load-s seconds, every --sample-ms: the instant and the averaged
power (NVML field values), the SM clock, the cap reasons and the power violation counter; then
it times bursts after fixed rests (in turns, --trials each), with no wait of the engine's own.

    python -m benchmarks.rest_signals [--preset llama3-8b-prefill] [--rests 0,0.05,0.1,0.2,0.35,0.6]
"""

from __future__ import annotations

import json
import statistics
import time

from benchmarks.figures import save
from benchmarks.rest_window import LoadedPlan, in_turns, loaded_plan_parser

FIELD_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (milliwatts)
FIELD_POWER_AVERAGE = 185  # NVML_FI_DEV_POWER_AVERAGE (milliwatts, over about a second)


def powers(gpu) -> tuple[float | None, float | None]:
    """(instant, averaged) power in watts, None where the driver does not give it."""
    values = gpu._read("nvmlDeviceGetFieldValues", [FIELD_POWER_INSTANT, FIELD_POWER_AVERAGE])
    if values is None:
        return None, None
    return tuple(None if v.nvmlReturn else v.value.uiVal / 1000.0 for v in values)  # type: ignore[return-value]


def after_load(gpu, seconds: float, every_s: float) -> list[dict]:
    """NVML's readings from the end of a load, every `every_s`, for `seconds`."""
    from tui.engine.telemetry import CLOCK_SM, decode_reasons

    rows, start = [], time.monotonic()
    while (t := time.monotonic() - start) < seconds:
        instant, average = powers(gpu)
        rows.append(
            {
                "t_s": round(t, 3),
                "power_instant_w": instant,
                "power_average_w": average,
                "sm_clock_mhz": gpu._read("nvmlDeviceGetClockInfo", CLOCK_SM),
                "reasons": decode_reasons(gpu.reason_mask()),
                "power_violation_ns": gpu.counters()[0],
            }
        )
        time.sleep(max(0.0, every_s - (time.monotonic() - start - t)))
    return rows


def first_after(rows: list[dict], quiet) -> float | None:
    """The first time from which `quiet(row)` holds to the end of the record."""
    at = None
    for row in rows:
        at = (at if at is not None else row["t_s"]) if quiet(row) else None
    return at


def main(argv: list[str] | None = None) -> int:
    parser = loaded_plan_parser(__doc__.splitlines()[0])
    parser.add_argument("--rests", default="0,0.05,0.1,0.2,0.35,0.6", help="fixed rests before a burst (s)")
    parser.add_argument("--record-s", type=float, default=1.2)
    parser.add_argument("--sample-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    plan = LoadedPlan(args.preset)
    gpu, env = plan.gpu, plan.env
    plan.load(args.load_s)
    record = after_load(gpu, args.record_s, args.sample_ms / 1000.0)
    limit = gpu.state().power_limit_w or 0.0
    last_counter = record[-1]["power_violation_ns"]
    quiet_at = {
        "power violation counter still": first_after(
            record, lambda r: r["power_violation_ns"] == last_counter
        ),
        "no cap reason": first_after(record, lambda r: "sw power cap" not in r["reasons"]),
        "instant power under half the limit": first_after(
            record, lambda r: r["power_instant_w"] is not None and r["power_instant_w"] < limit / 2
        ),
    }
    rests = [float(r) for r in args.rests.split(",")]
    bursts = []
    for trial in range(args.trials):
        for rest in in_turns(rests, trial):
            plan.load(args.load_s)
            stats = plan.burst(lambda _max_s, rest=rest: (time.sleep(rest), (rest, None))[1])
            bursts.append(
                {
                    "rest_s": rest,
                    "median_us": round(stats.median_us, 2),
                    "capped_pct": stats.telemetry.power_capped_pct,
                }
            )
    by_rest = {
        str(r): {
            "median_us": statistics.median(b["median_us"] for b in bursts if b["rest_s"] == r),
            "each": [b["median_us"] for b in bursts if b["rest_s"] == r],
        }
        for r in rests
    }
    figures = {
        "preset": args.preset,
        "gpu": env.gpu_name,
        "power_limit_w": limit,
        "quiet_from_s": quiet_at,
        "burst_after_rest": by_rest,
        "record": record,
    }
    print(json.dumps({k: v for k, v in figures.items() if k != "record"}, indent=1))
    save(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
