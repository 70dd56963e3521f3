"""Where the time to a first answer goes: each step measured cold, in a fresh process of its own,
then the whole of `run` and the dashboard's first result for the same configuration with the
options the dashboard uses, and the difference (the dashboard's own cost).

    python -m benchmarks.startup [--preset NAME] [--repeat N] [--out result.json]

Steps: importing torch, cudnn and the app (Textual); the first validate() of a process; the
engine process's start (a fork of the server that imported torch); then `run` end to end and
its phases (on a GPU: planning, JIT, timing and the reference, as the result reports them).
Targets live here, not in tests: the dashboard's first result at most 1 s slower than `run`;
on the H200 the second launch's first result for the seed at most 4 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time

STEPS = {
    "import torch": "import torch",
    "import cudnn": "import cudnn",
    "import the dashboard": "import tui.app",
    "first validate()": (
        "import time, tui.engine.graph as g; from tui.engine.config import SdpaConfig; "
        "t = time.perf_counter(); g.define_and_validate(SdpaConfig()); print(time.perf_counter() - t)"
    ),
    "engine process start": (
        "import time; from tui.engine.session import EngineSession; t = time.perf_counter(); s = EngineSession(); "
        "s.__enter__(); s.ready(); print(time.perf_counter() - t); s.__exit__(None, None, None)"
    ),
}


def fresh(code: str) -> float:
    """Seconds a fresh interpreter takes to run `code` (or what `code` prints, when it times itself)."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    return float(out.strip().splitlines()[-1]) if out.strip() else wall


def run_end_to_end(preset: str) -> tuple[float, dict]:
    """`run` with the dashboard's options (half the replays, 1 ms replays), as a user types it."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "tui", "run", "--preset", preset, "--replays", "10", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    result = json.loads(out)
    phases = {p["name"]: round(p["seconds"], 3) for p in result["passes"][0]["phases"]}
    return wall, {
        "status": result["status"],
        "phases_s": phases,
        "wall_s_in_engine": result.get("wall_seconds"),
    }


async def dashboard_first_result(preset: str) -> tuple[float, str]:
    from tui.app import make_app
    from tui.presets import find

    t0 = time.perf_counter()
    app = make_app(find(preset).config)
    async with app.run_test(size=(140, 44)) as pilot:
        while app.result is None:
            await pilot.pause(0.02)
        return time.perf_counter() - t0, app.result.status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2-seed")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each step; the median is reported")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    figures: dict = {"preset": args.preset, "steps_s": {}}
    for name, code in STEPS.items():
        figures["steps_s"][name] = round(statistics.median(fresh(code) for _ in range(args.repeat)), 3)
    runs = [run_end_to_end(args.preset) for _ in range(args.repeat)]
    figures["run_s"] = round(statistics.median(w for w, _ in runs), 2)
    figures["run_result"] = runs[-1][1]
    first = [asyncio.run(dashboard_first_result(args.preset)) for _ in range(args.repeat)]
    figures["dashboard_first_result_s"] = round(statistics.median(w for w, _ in first), 2)
    figures["dashboard_status"] = first[-1][1]
    figures["dashboard_minus_run_s"] = round(figures["dashboard_first_result_s"] - figures["run_s"], 2)
    print(json.dumps(figures, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
