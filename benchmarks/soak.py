"""The GPU soak: random valid configurations through the engine process, as the dashboard drives it.

N configurations from the generator the fuzz tests use (tui.model.sampling), each run in the
dashboard's live timing through one engine client, with faults injected on the way: a SIGKILL and
a SIGSTOP of the engine process in the middle of a run, a lost CUDA context on purpose (an
illegal address), and FP8 forwards with dropout run anyway (a known issue that crashes cuDNN 9.19
on Hopper). Every 25 requests it prints requests answered, restarts, statuses, mismatches and
the engine's GPU memory (NVML). What must hold: every crash and every injected fault is followed
by a restart and the next request is answered by the fresh engine; no mismatch whose worst error
is within the tolerance floor; GPU memory after the soak within 1 GiB of its level after 25.

    python -m benchmarks.soak [--n 200] [--seed 1] [--budget-s 540] [--json OUT] [--no-faults]

With --no-faults it is the hardening check: random requests only, and 0 restarts expected (it
runs on a CPU machine too: the engine then answers in CPU mode).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import signal
import sys
import time

from tui.engine.runner import RunOptions
from tui.model.config import SdpaConfig
from tui.model.options import TimingOptions
from tui.model.results import RunResult
from tui.model.sampling import random_config
from tui.model.statuses import GOOD_STATUSES, STATUS_CRASH, STATUS_ERROR, STATUS_MISMATCH
from tui.model.validation import validate
from tui.process.client import EngineClient
from tui.process.session import EngineSession

GIB = 1 << 30
SILENCE_LIMIT_S = 20.0  # how long a stopped engine may stay silent before the client stops it
# the issue's own crashing shape (DESIGN fact 17), then two more FP8-with-dropout draws
FP8_DROPOUT = SdpaConfig(b=2, h_q=32, h_kv=16, s_q=512, s_kv=4096, d_qk=128, d_v=128, dtype="fp8_e4m3",
                         causal="top_left", dropout=0.1)  # fmt: skip


def live_options(run_anyway: bool = False) -> RunOptions:
    """The dashboard's live timing (SdpaExplorerApp.live_options): ten replays of about 1 ms."""
    return RunOptions(timing=TimingOptions(replays=10, target_replay_ms=1.0), run_anyway=run_anyway)


def fp8_dropout(rng: random.Random) -> SdpaConfig:
    """A random FP8 forward with dropout (the known issue), without what FP8 or dropout refuse
    anyway (a bias, ALiBi, a bottom-right diagonal), so that it reaches a kernel."""
    while True:
        c = random_config(rng, fp8_share=1.0, backward_share=0.0)
        causal = c.causal if c.causal != "bottom_right" else "top_left"
        c = dataclasses.replace(c, dropout=0.1, backward=False, bias="none", alibi=False, causal=causal)
        if not validate(c):
            return c


def plan(n: int, rng: random.Random, faults_on: bool = True) -> list[tuple[str, SdpaConfig | None]]:
    """The requests in order: random configurations, with the faults spread among them."""
    steps: list[tuple[str, SdpaConfig | None]] = [("run", random_config(rng)) for _ in range(n)]
    if not faults_on:
        return steps
    faults = [("kill", None), ("stop", None), ("fault", None), ("anyway", FP8_DROPOUT),
              ("anyway", fp8_dropout(rng)), ("anyway", fp8_dropout(rng))]  # fmt: skip
    for i, fault in enumerate(faults):  # each followed by the seed's configuration: it must pass
        at = (i + 1) * n // (len(faults) + 1) + 2 * i  # spread over the random runs
        steps[at:at] = [fault, ("probe", SdpaConfig())]
    return steps


class GpuMemory:
    """The engine's GPU memory by NVML: its process's own where NVML can see it, else the device's."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no NVML (a CPU machine trying the soak's logic): memory unknown
            self.nvml = self.handle = None

    def read(self, pid: int | None) -> dict[str, float | None]:
        if self.nvml is None:
            return {"engine_gib": None, "device_gib": None}
        procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        own = [p.usedGpuMemory for p in procs if p.pid == pid and p.usedGpuMemory is not None]
        used = self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used
        return {"engine_gib": own[0] / GIB if own else None, "device_gib": used / GIB}


def interrupter(client: EngineClient, signum: int) -> object:
    """A progress watcher that sends `signum` to the engine process at the run's first words."""
    sent = []

    def watch(_text: str) -> None:
        if not sent and client.pid is not None:
            sent.append(signum)
            os.kill(client.pid, signum)

    return watch


def soak(n: int, seed: int, budget_s: float, faults_on: bool = True) -> dict:
    rng = random.Random(seed)
    memory = GpuMemory()
    client = EngineClient(time_limit_s=SILENCE_LIMIT_S)
    rows: list[dict] = []
    started = time.perf_counter()
    with EngineSession(client) as session:
        session.ready()
        for kind, config in plan(n, rng, faults_on):
            if time.perf_counter() - started > budget_s:
                break
            t0 = time.perf_counter()
            if kind == "fault":
                result = session.inject_fault()
            elif kind in ("kill", "stop"):
                signum = signal.SIGKILL if kind == "kill" else signal.SIGSTOP
                result = session.run(random_config(rng), live_options(), interrupter(client, signum))
            else:
                result = session.run(config, live_options(run_anyway=kind == "anyway"))
            rows.append(row(len(rows) + 1, kind, result, time.perf_counter() - t0, session.restarts))
            if len(rows) % 25 == 0:
                report(rows, memory.read(client.pid))
        final = memory.read(client.pid)
    return summary(rows, final, time.perf_counter() - started)


def row(i: int, kind: str, result: RunResult, seconds: float, restarts: int) -> dict:
    worst = max((c for p in result.passes for c in p.checks if c.cudnn is not None),
                key=lambda c: c.cudnn.max_abs / max(c.atol, 1e-30), default=None)  # fmt: skip
    return {
        "request": i,
        "kind": kind,
        "label": result.config.label(),
        "config": result.config.to_dict(),
        "status": result.status,
        "message": result.message[:300],
        "crash": dataclasses.asdict(result.crash) if result.crash else None,
        "worst_max_abs": worst.cudnn.max_abs if worst else None,
        "worst_atol": worst.atol if worst else None,
        "seconds": round(seconds, 3),
        "restarts": restarts,
    }


def report(rows: list[dict], mem: dict) -> None:
    statuses = collections.Counter(r["status"] for r in rows)
    engine, device = (f"{mem[k]:.2f}" if mem[k] is not None else "?" for k in ("engine_gib", "device_gib"))
    print(
        f"{len(rows):4} requests: restarts {rows[-1]['restarts']}, {dict(statuses)}, "
        f"engine GPU memory {engine} GiB (device {device} GiB)",
        flush=True,
    )
    rows[-1]["memory"] = mem


def summary(rows: list[dict], final: dict, seconds: float) -> dict:
    """What must hold, checked: recovery after each crash, no false FAIL, memory."""
    recovered = []
    for i, r in enumerate(rows):
        if r["status"] in (STATUS_CRASH, STATUS_ERROR) or r["kind"] not in ("run", "probe"):
            nxt = rows[i + 1] if i + 1 < len(rows) else None  # a probe after a fault, else the next run
            ok = nxt is not None and (nxt["status"] in GOOD_STATUSES if nxt["kind"] == "probe" else
                                      nxt["status"] not in (STATUS_CRASH, STATUS_ERROR))  # fmt: skip
            recovered.append({"request": r["request"], "kind": r["kind"], "status": r["status"],
                              "next_status": nxt["status"] if nxt else None, "recovered": ok})  # fmt: skip
    fails = [r for r in rows if r["status"] == STATUS_MISMATCH]
    false_fails = [
        r for r in fails if r["worst_max_abs"] is not None and r["worst_max_abs"] <= r["worst_atol"]
    ]
    first = next((r["memory"] for r in rows if "memory" in r), None)
    key = "engine_gib" if first and first["engine_gib"] is not None and final["engine_gib"] else "device_gib"
    drift = final[key] - first[key] if first and first[key] is not None and final[key] is not None else None
    return {
        "requests": len(rows),
        "seconds": round(seconds, 1),
        "restarts": rows[-1]["restarts"] if rows else 0,
        "statuses": dict(collections.Counter(r["status"] for r in rows)),
        "crashes_and_faults": recovered,
        "all_recovered": all(x["recovered"] for x in recovered),
        "mismatches": [
            {k: r[k] for k in ("request", "label", "message", "worst_max_abs", "worst_atol")} for r in fails
        ],
        "false_fails": len(false_fails),
        "memory": {"after_25": first, "final": final, "measure": key, "drift_gib": drift},
        "memory_ok": drift is not None and abs(drift) <= 1.0,
        "errors": [
            {k: r[k] for k in ("request", "kind", "label", "message")}
            for r in rows
            if r["status"] == STATUS_ERROR
        ],
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200, help="random configurations (faults come on top)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget-s", type=float, default=540.0, help="stop asking after this long")
    parser.add_argument("--json", help="write the summary and every request here")
    parser.add_argument(
        "--no-faults", action="store_true", help="random configurations only: 0 restarts expected"
    )
    args = parser.parse_args()
    result = soak(args.n, args.seed, args.budget_s, faults_on=not args.no_faults)
    shown = {k: v for k, v in result.items() if k != "rows"}
    print(json.dumps(shown, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    memory_ok = result["memory_ok"] or result["memory"]["drift_gib"] is None  # no NVML: not judged
    quiet = not args.no_faults or result["restarts"] == 0
    sys.exit(0 if result["all_recovered"] and memory_ok and quiet and not result["false_fails"] else 1)


if __name__ == "__main__":
    main()
