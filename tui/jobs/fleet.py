"""Every GPU of the box at once (`check --gpus`): one engine process per GPU, all running the same
cases side by side, then one table. A GPU whose kernel time on a case is more than
STRAGGLER_PCT slower than the median of its siblings on that case is a straggler (throttling, a
bad card, a wrong clock). Only burst-regime figures that held still are compared: a capped or
unstable figure says nothing about the card."""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..model.config import SdpaConfig
from ..model.results import Environment
from ..model.statuses import REGIME_BURST, STATUS_OK
from ..present.format import us
from ..present.tables import FIGURE, NAME, FitTable
from .check import case_line, case_row, follow_up

STRAGGLER_PCT = 5.0


def visible_gpus() -> int:
    """How many GPUs this process may use: CUDA_VISIBLE_DEVICES's entries where it is set, else
    NVML's count (no CUDA context is made here), else torch's."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([e for e in visible.split(",") if e.strip()])
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        import torch

        return torch.cuda.device_count()


def parse_gpus(text: str, count: int) -> list[int]:
    """`all` or a list of indices (`0,2`) -> the GPUs to use; ValueError says what is wrong."""
    if text.strip().lower() == "all":
        if count < 1:
            raise ValueError("no GPU is visible to this process")
        return list(range(count))
    try:
        gpus = sorted({int(w) for w in text.split(",") if w.strip()})
    except ValueError:
        raise ValueError(f"all, or GPU indices such as 0,1 (got {text!r})") from None
    bad = [g for g in gpus if not 0 <= g < count]
    if not gpus or bad:
        which = ", ".join(map(str, bad)) or repr(text)
        raise ValueError(f"GPU {which} is not one of the {count} visible")
    return gpus


def gpu_session(device: int) -> Any:
    """The engine process that runs on `device` alone (tests give simulated GPUs instead)."""
    from ..process.client import EngineClient
    from ..process.session import EngineSession

    return EngineSession(EngineClient(device=device))


@dataclass
class GpuRun:
    """What one GPU did: its environment, every case's row and result, and its restarts."""

    device: int
    environment: Environment | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    down: str = ""  # why its engine could not start
    restarts: int = 0

    @property
    def passed(self) -> int:
        return sum(r["status"] == STATUS_OK for r in self.rows)

    label: str = ""  # how the table names it ('' : "GPU <device>")

    def identity(self) -> dict[str, Any]:
        return identity_of(self.environment, self.device)

    @property
    def title(self) -> str:
        return self.label or f"GPU {self.device}"


def identity_of(env: Environment | None, device: int | None = None) -> dict[str, Any]:
    """Which GPU of which host: what `--json` names a GPU by, so files from many hosts can be joined."""
    return {
        "index": env.gpu_index if env and env.gpu_index is not None else device,
        "name": env.gpu_name if env else "",
        "uuid": env.gpu_uuid if env else "",
        "serial": env.gpu_serial if env else "",
        "host": env.host if env else "",
    }


def runs_from_checks(sources: list[tuple[str, dict[str, Any]]]) -> list[GpuRun]:
    """`check --json` and `check --gpus --json` outputs (from many hosts) as one list of GPUs."""
    runs = []
    for name, data in sources:
        gpus = data.get("gpus") or [{**data.get("gpu", {}), "cases": data.get("cases", [])}]
        for g in gpus:
            where = f"{g.get('host') or name} GPU {g.get('index', '?')}"
            runs.append(GpuRun(len(runs), rows=list(g.get("cases", [])), label=where))
    return runs


def run_on_gpus(
    gpus: list[int],
    cases: list[tuple[str, SdpaConfig]],
    options_for: Callable[[str, Environment], Any],
    say: Callable[[str], None],
    seed: int,
    session_for: Callable[[int], Any] = gpu_session,
    on_result: Callable[[str, Any], None] | None = None,
) -> list[GpuRun]:
    """Every case on every GPU, each GPU in a thread of its own with its own engine process;
    `on_result(case, result)` hears each result as it comes, one at a time."""
    heard = threading.Lock()
    runs = [GpuRun(g) for g in gpus]

    def work(run: GpuRun) -> None:
        with session_for(run.device) as session:
            run.environment = session.ready()
            if run.environment is None:
                run.down = session.down
                say(
                    f"[red]FAIL[/red] GPU {run.device}: the engine process cannot start: {escape(session.down)}"
                )
                return
            for name, config in cases:
                result = session.run(config, options_for(name, run.environment))
                run.rows.append(case_row(name, result))
                say(f"GPU {run.device} {case_line(name, result)}")
                if on_result is not None:
                    with heard:
                        on_result(name, result)
                follow_up(result, seed, Console(stderr=True), f"GPU {run.device} {name}")
            run.restarts = session.restarts

    threads = [threading.Thread(target=work, args=(run,), name=f"sdpa-gpu-{run.device}") for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return runs


def comparable(row: dict[str, Any]) -> float | None:
    """A case's forward kernel time where it may be compared across cards: passed, burst, stable."""
    if row["status"] != STATUS_OK or row.get("regime") != REGIME_BURST or row.get("stable") is not True:
        return None
    return row.get("kernel_us")


def stragglers(runs: list[GpuRun], pct: float = STRAGGLER_PCT) -> list[dict[str, Any]]:
    """Each (GPU, case) slower than the median of its siblings' comparable figures by over `pct`."""
    found = []
    cases = list(dict.fromkeys(r["case_key"] for run in runs for r in _keyed(run.rows)))
    for key in cases:
        figures = {
            run.device: t for run in runs for r in _keyed(run.rows) if r["case_key"] == key
            if (t := comparable(r)) is not None
        }  # fmt: skip
        for device, t in figures.items():
            siblings = [v for d, v in figures.items() if d != device]
            if not siblings:
                continue
            median = statistics.median(siblings)
            slower = 100.0 * (t / median - 1.0)
            if slower > pct:
                name, label = key
                found.append(dict(case=name, label=label, gpu=device, kernel_us=t,
                                  siblings_median_us=median, slower_pct=round(slower, 2)))  # fmt: skip
    return found


def _keyed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the key a case is matched by across GPUs (a preset's name alone is not unique:
    the smoke set's cases share one)."""
    return [{**r, "case_key": (r["case"], r["label"])} for r in rows]


def fleet_table(runs: list[GpuRun], slow: list[dict[str, Any]]) -> FitTable:
    """A row a case, a column a GPU: its kernel time (a straggler's in red with how much slower),
    then how many passed on each."""
    flagged = {(s["gpu"], s["case"], s["label"]): s for s in slow}
    table = FitTable(title="Every GPU: forward kernel time per case")
    table.add_column("case", NAME)
    for run in runs:
        who = run.identity()
        table.add_column(f"GPU {run.device}" + (f" {who['uuid'][:12]}" if who["uuid"] else ""), FIGURE)
    keys = list(dict.fromkeys((r["case"], r["label"]) for run in runs for r in run.rows))
    for name, label in keys:
        cells: list[Any] = [Text(f"{name} {label}")]
        for run in runs:
            row = next((r for r in run.rows if (r["case"], r["label"]) == (name, label)), None)
            if row is None:
                cells.append("-")
            elif row["status"] != STATUS_OK:
                cells.append(Text(f"FAIL {row['status']}", style="red"))
            elif (s := flagged.get((run.device, name, label))) is not None:
                cells.append(Text(f"{us(row['kernel_us'])} +{s['slower_pct']:.1f}%", style="bold red"))
            else:
                cells.append(us(row.get("kernel_us")) + ("" if comparable(row) is not None else " ~"))
        table.add_row(*cells)
    table.add_row("passed", *(f"{run.passed}/{len(run.rows)}" if not run.down else "down" for run in runs))
    table.caption = (
        f"~: not compared (not burst, or unstable); a straggler is over {STRAGGLER_PCT:g}% slower "
        "than the median of the other GPUs on the same case"
    )
    return table


def fleet_json(runs: list[GpuRun], slow: list[dict[str, Any]]) -> dict[str, Any]:
    """What `check --gpus --json` prints: per GPU its identity, counts and cases; the stragglers."""
    gpus = []
    for run in runs:
        failed = len(run.rows) - run.passed
        gpus.append({**run.identity(), "device": run.device, "passed": run.passed, "failed": failed,
                     "down": run.down, "restarts": run.restarts, "cases": run.rows})  # fmt: skip
    return {"gpus": gpus, "stragglers": slow, "straggler_pct": STRAGGLER_PCT}


def fleet_ok(runs: list[GpuRun], slow: list[dict[str, Any]]) -> bool:
    """Every GPU ran every case and passed it, and none is a straggler."""
    return not slow and all(not r.down and r.passed == len(r.rows) and r.rows for r in runs)


def print_stragglers(console: Console, runs: list[GpuRun], slow: list[dict[str, Any]]) -> None:
    """The table, then a line a straggler."""
    runs_by = {run.device: run for run in runs}
    console.print(fleet_table(runs, slow))
    for s in slow:
        console.print(
            f"[red]STRAGGLER[/red] {escape(runs_by[s['gpu']].title)} on {escape(s['case'])} "
            f"{escape(s['label'])}: {us(s['kernel_us'])}, {s['slower_pct']:.1f}% slower than its "
            f"siblings' median {us(s['siblings_median_us'])}",
            soft_wrap=True,
        )
