"""Where the time to a first answer goes: each step measured cold, in a fresh process of its own,
then the whole of `run` and the dashboard's first result for the same configuration with the
options the dashboard uses, and the difference (the dashboard's own cost).

    python -m benchmarks.startup [--preset NAME] [--repeat N] [--out result.json]

Steps: importing torch, cudnn and the app (Textual); the first validate() of a process; the
engine process's start (with no engine server: a fork of this launch's fork server, which
imports torch first; with the engine server up: a fork of it); then `run` end to end and its
phases (on a GPU: planning, JIT, timing and the reference, as the result reports them).
The first launch starts an engine server (in a folder of the benchmark's own, stopped at the
end); the later launches, `run` and the dashboard in turns, each from a fresh process, find it.
The dashboard's breakdown says when it painted, when its engine said ready and when the first
result was on screen. Targets live here, not in tests: the dashboard's first result at most 1 s
slower than `run`; on the H200 the second launch's first result for the seed at most 4 s.
`--no-server` measures every launch as if none were running (SDPA_EXPLORER_SERVER_IDLE=0).
`env` is timed too, launch to exit, as `python -m tui env --json` and as `uv run sdpa-explorer env
--json` (where uv is on the PATH): the first launch of each starts its engine server (uv run sets
variables of its own, so its engines come from a server of their own), the next `--repeat` find it
(target: a median of at most 2.5 s). `--env-only` measures that alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.figures import save

STEPS = {
    "import torch": "import torch",
    "import cudnn": "import cudnn",
    "import the dashboard": "import tui.app",
    "first validate()": (
        "import time, tui.engine.graph as g; from tui.model.config import SdpaConfig; "
        "t = time.perf_counter(); g.define_and_validate(SdpaConfig()); print(time.perf_counter() - t)"
    ),
}
ENGINE_START = (
    "import time; from tui.process.session import EngineSession; t = time.perf_counter(); s = EngineSession(); "
    "s.__enter__(); s.ready(); print(time.perf_counter() - t); s.__exit__(None, None, None)"
)


def fresh_engine_start(server: bool) -> float:
    """An engine process's start to ready in a fresh process, with or without the engine server."""
    if server:
        return fresh(ENGINE_START)
    with_env = {**os.environ, "SDPA_EXPLORER_SERVER_IDLE": "0"}
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENGINE_START], capture_output=True, text=True, check=True, env=with_env
    )
    return float(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else time.perf_counter() - t0


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
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"run gave no result (exit {done.returncode}): {done.stderr[-2000:]}") from None
    phases = {p["name"]: round(p["seconds"], 3) for p in result["passes"][0]["phases"]}
    return wall, {
        "status": result["status"],
        "phases_s": phases,
        "wall_s_in_engine": result.get("wall_seconds"),
    }


# the dashboard in a fresh process, made as the command line makes it: milestones in seconds from
# its launch (the wall clock the parent passes), the first result's line as it is shown, and
# whether this process imported torch (it must not: torch belongs to the engine process); the
# engine's teardown is not counted
DASHBOARD = """
import asyncio, os, sys, time
launched = float(os.environ["STARTUP_LAUNCHED"])
def say(what, value=None):  # to the descriptor: the running app captures sys.stdout
    os.write(1, f"{what} {value or round(time.time() - launched, 3)}\\n".encode())
from tui.cli.main import dashboard  # as `sdpa-explorer` launches it: the fork server first, then the app
from textual.screen import Screen
from tui.store.presets import find
paint = Screen._compositor_refresh
def first_paint(screen):
    paint(screen)
    if not getattr(Screen, "painted", False):
        Screen.painted = True
        say("first_paint")
Screen._compositor_refresh = first_paint
async def main():
    app = dashboard(find(sys.argv[1]).config)
    async with app.run_test(size=(140, 44)):
        while app.environment is None and app.result is None:
            await asyncio.sleep(0.01)  # not pilot.pause(): that waits on every widget each time
        say("engine_ready")
        while app.result is None:
            await asyncio.sleep(0.01)
        say("first_result")
        say("status", app.result.status)
asyncio.run(main())
say("ui_imported_torch", str("torch" in sys.modules))
"""


def dashboard_first_result(preset: str) -> dict:
    """The dashboard launched afresh: seconds from launch to its first paint, its engine's ready and
    its first result on screen, that result's status, and whether the UI's process imported torch."""
    env = {**os.environ, "STARTUP_LAUNCHED": repr(time.time())}
    cmd = [sys.executable, "-c", DASHBOARD, preset]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        said = dict(line.split() for line in proc.stdout if len(line.split()) == 2)
    if "status" not in said:
        raise RuntimeError(f"the dashboard gave no first result (exit {proc.returncode})")
    return {k: (v if k in ("status", "ui_imported_torch") else float(v)) for k, v in said.items()}


def env_end_to_end(command: list[str]) -> float:
    """`env --json` launched afresh, launch to exit: what the engine process says it sees."""
    t0 = time.perf_counter()
    done = subprocess.run([*command, "env", "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"env failed (exit {done.returncode}): {done.stderr[-2000:]}")
    json.loads(done.stdout)
    return wall


def env_launches(repeat: int, figures: dict) -> dict:
    """`env`'s first launch (it starts the engine server) and the median of the next `repeat`."""
    commands = {"env": [sys.executable, "-m", "tui"]}
    if shutil.which("uv"):
        commands["env_uv_run"] = ["uv", "run", "sdpa-explorer"]
    for name, command in commands.items():
        figures[f"{name}_first_launch_s"] = round(env_end_to_end(command), 2)
        walls = [env_end_to_end(command) for _ in range(repeat)]
        figures[f"{name}_s"] = round(statistics.median(walls), 2)
        figures[f"{name}_each_s"] = [round(w, 2) for w in walls]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2-seed")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each step; the median is reported")
    parser.add_argument("--out", help="write the figures here as JSON")
    parser.add_argument(
        "--no-server", action="store_true", help="no engine server: each launch imports torch"
    )
    parser.add_argument("--env-only", action="store_true", help="time `env` alone")
    args = parser.parse_args(argv)
    os.environ["SDPA_EXPLORER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="sdpa-bench-")  # no user's server
    if args.no_server:
        os.environ["SDPA_EXPLORER_SERVER_IDLE"] = "0"
    if args.env_only:
        try:
            measured = env_launches(args.repeat, {"engine_server": not args.no_server})
        finally:
            from tui.process.server_client import ask_all

            ask_all("stop")
        print(json.dumps(measured, indent=1))
        save(measured, args.out)
        return 0
    figures: dict = {"preset": args.preset, "engine_server": not args.no_server, "steps_s": {}}
    for name, code in STEPS.items():
        figures["steps_s"][name] = round(statistics.median(fresh(code) for _ in range(args.repeat)), 3)
    starts = [fresh_engine_start(server=False) for _ in range(args.repeat)]
    figures["steps_s"]["engine process start, no engine server"] = round(statistics.median(starts), 3)
    try:
        first_launch = dashboard_first_result(args.preset)  # starts the engine server, unless --no-server
        figures["first_launch_first_result_s"] = first_launch["first_result"]
        if not args.no_server:
            starts = [fresh_engine_start(server=True) for _ in range(args.repeat)]
            figures["steps_s"]["engine process start, engine server up"] = round(statistics.median(starts), 3)
        measured = env_launches(args.repeat, later_launches(args.preset, args.repeat, figures))
    finally:
        from tui.process.server_client import ask_all

        ask_all("stop")
    print(json.dumps(measured, indent=1))
    save(measured, args.out)
    return 0


def later_launches(preset: str, repeat: int, figures: dict) -> dict:
    """`run` and the dashboard, launched afresh in turns after the first launch."""
    runs, firsts = [], []
    for _ in range(repeat):  # in turns: a busy spell of the machine falls on both
        runs.append(run_end_to_end(preset))
        firsts.append(dashboard_first_result(preset))
    figures["run_s"] = round(statistics.median(w for w, _ in runs), 2)
    figures["run_result"] = runs[-1][1]
    for name in ("first_paint", "engine_ready", "first_result"):
        figures[f"dashboard_{name}_s"] = round(statistics.median(f[name] for f in firsts), 2)
    figures["dashboard_status"] = firsts[-1]["status"]
    figures["dashboard_imported_torch"] = [f.get("ui_imported_torch") for f in firsts]  # each "False"
    figures["dashboard_minus_run_s"] = round(figures["dashboard_first_result_s"] - figures["run_s"], 2)
    figures["dashboard_minus_run_each_s"] = [
        round(f["first_result"] - w, 2) for f, (w, _) in zip(firsts, runs, strict=True)
    ]
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
