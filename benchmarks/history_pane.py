"""History pane figures: 10,000 generated runs in a history of their own (a temporary folder), the
dashboard headless with no engine (nothing runs: the pane reads only the history), and the time
each key takes until the screen shows its answer. No GPU needed.

    python -m benchmarks.history_pane [--runs N] [--freeze-gc] [--out result.json]

The runs: the H200 recordings of tests/data (forward, training step, FP8, peers) under the built-in
presets' configurations and other shapes, on four GPUs and three cuDNN/driver versions, about one
in four not ok (mismatch, refused, crash, cancelled, CPU only), 10 minutes apart. Keys, each timed
from the key sent until its answer is painted: a filter typed character by character (the table
holds the matching runs, newest first, and the count) and deleted with backspace; page-down and
down through the first pages (the cursor moved; at the end of what is read, the next page is
there); Enter on a run (its result in the panes, its configuration in the form). Per kind of key:
median, p90 and max wall-clock ms, and the UI thread's median CPU ms (what a key costs, apart from
the machine's other load: the load average is reported too). --freeze-gc moves what is alive
once the dashboard is up out of the collector's full passes, as tests/conftest.py does.
Target (not a test assertion): every key within 100 ms on a CPU machine. That 10,000 runs load a
page at a time is a CPU test (tests/test_history_pane.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.figures import save

TARGET_MS = 100.0
DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
RECORDINGS = ("seed_v21", "train_v21", "fp8_v21", "peers")  # tests/data/NAME_h200.json
GPUS = ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S")
VERSIONS = (  # cuDNN, frontend, torch, driver
    ("9.19.0", "1.32.0", "2.11.0+cu130", "580.159.04"),
    ("9.10.2", "1.14.0", "2.8.0+cu128", "570.133.20"),
    ("9.13.0", "1.16.0", "2.9.1+cu129", "575.57.08"),
)
NOT_OK = ("mismatch", "unsupported", "unsupported", "crash", "cancelled", "cpu_only")
FILTERS = ("llama3-8b-pre", "h100")  # typed, then deleted key by key
REOPENED = 12  # runs opened with Enter
PAGES = 3  # pages scrolled through with page-down, then down across one more page's end
KEY_NAMES = {"-": "minus", ".": "full_stop", " ": "space"}


def variants() -> list[tuple[object, str | None]]:
    """Distinct (result, preset) runs: each recording under every built-in preset's configuration
    and a few shapes of no preset, on each GPU and version, some not ok."""
    from tui.model.results import RunResult
    from tui.store.presets import load_all

    presets = sorted(load_all()[0].values(), key=lambda p: p.name)
    pool: list[tuple[object, str | None]] = []
    for i, name in enumerate(RECORDINGS):
        base = RunResult.from_json((DATA / f"{name}_h200.json").read_text())
        configs = [(p.config, p.name) for p in presets[i::2]]  # each recording half the presets
        configs += [
            (dataclasses.replace(base.config, b=b, s_q=s, s_kv=s), None) for b, s in ((2, 512), (8, 4096))
        ]
        for j, (config, preset) in enumerate(configs):
            gpu, (cudnn, frontend, torch, driver) = GPUS[j % len(GPUS)], VERSIONS[(i + j) % len(VERSIONS)]
            env = dataclasses.replace(base.environment, gpu_name=gpu, cudnn_backend_version=cudnn,
                                      frontend_version=frontend, torch_version=torch, driver_version=driver)  # fmt: skip
            result = dataclasses.replace(base, config=config, environment=env)
            pool.append((result, preset))
            status = NOT_OK[(i + j) % len(NOT_OK)]
            if j % 3 == 0:  # a third of the configurations also once not ok
                kept = result.passes if status == "mismatch" else ()
                pool.append((dataclasses.replace(result, status=status, passes=kept,
                                                 message=f"{status} (generated)"), preset))  # fmt: skip
    return pool


def generate(path: Path, runs: int) -> dict:
    """`runs` rows into the history at `path`: the real write for the first, then the rest as the
    same rows (each distinct result serialized once), 10 minutes apart, the newest now."""
    from tui.store.history import COLUMN_NAMES, History, row_values, stored_result

    t0 = time.perf_counter()
    pool = variants()
    with History(path) as history:
        history.record(pool[0][0], pool[0][1], "run")  # the file, its table and indexes
    blobs = [stored_result(result) for result, _ in pool]
    now = time.time()
    rows = []
    for k in range(1, runs):
        n = (k * 7919) % len(pool)  # a stride through the pool: neighbours differ
        result, preset = pool[n]
        values = row_values(result, preset, ("dashboard", "run", "check")[k % 3])
        values["recorded_at"] = now - (runs - 1 - k) * 600
        values["host"] = f"node{k % 5}"
        rows.append((*(values[name] for name in COLUMN_NAMES), blobs[n]))
    sql = f"INSERT INTO runs ({', '.join(COLUMN_NAMES)}, result) VALUES ({', '.join('?' * (len(COLUMN_NAMES) + 1))})"
    with sqlite3.connect(path) as conn:
        conn.executemany(sql, rows)
    conn.close()
    return {"runs": runs, "distinct_results": len(pool), "generated_s": round(time.perf_counter() - t0, 2),
            "file_mib": round(path.stat().st_size / 2**20, 1)}  # fmt: skip


async def send(app, key: str) -> tuple[float, float]:
    """A key as a terminal sends it; when it was sent (wall clock, and the UI thread's CPU time)."""
    from textual import events

    char = key if len(key) == 1 else {"backspace": "\x08", "enter": "\r"}.get(key)
    sent = time.perf_counter(), time.thread_time()
    app.post_message(events.Key(KEY_NAMES.get(key, key), char))
    return sent


async def answered(app, sent: tuple[float, float], predicate: Callable[[], bool]) -> tuple[float, float]:
    """Milliseconds from `sent` until `predicate` holds and the screen after it is painted: wall
    clock, and CPU time of the UI thread (the benchmark's own looks included: a few µs each)."""
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the dashboard did not answer")
        await asyncio.sleep(0.001)
    await app.screen.wait_for_refresh()
    return (time.perf_counter() - sent[0]) * 1000, (time.thread_time() - sent[1]) * 1000


def summary(times: list[tuple[float, float]]) -> dict:
    wall = [w for w, _ in times]
    p90 = statistics.quantiles(wall, n=10, method="inclusive")[8] if len(wall) > 1 else wall[0]
    return {"keys": len(wall), "median_ms": round(statistics.median(wall), 1), "p90_ms": round(p90, 1),
            "max_ms": round(max(wall), 1), "cpu_median_ms": round(statistics.median(c for _, c in times), 1)}  # fmt: skip


async def measure(runs: int, freeze_gc: bool = False) -> dict:
    from tui.app import make_app
    from tui.app.widgets.history import PAGE, HistoryPane
    from tui.model.config import SdpaConfig
    from tui.store.history import History

    figures = generate(Path(os.environ["SDPA_EXPLORER_DATA_DIR"]) / "history.sqlite3", runs)
    keys: dict[str, list[tuple[float, float]]] = {
        kind: [] for kind in ("type", "delete", "page_down", "down", "reopen")
    }
    app = make_app(SdpaConfig(), start_engine=False)
    async with app.run_test(size=(140, 44)) as pilot:
        tabs = app.query_one("#tabs")
        await pilot.pause()
        if freeze_gc:  # what is alive once the dashboard is up, out of the collector's full passes
            gc.collect()
            gc.freeze()

        def listed() -> bool:  # the pane is made the first time it is shown
            pane = app.pane("history")
            return tabs.active == "tab-history" and pane is not None and len(pane.rows) == PAGE

        shown = await answered(app, await send(app, "f2"), listed)
        figures["f2_ms"] = round(shown[0], 1)
        pane, table = app.query_one(HistoryPane), app.query_one("#history-table")
        assert pane.total == runs

        with History() as history:  # what each filter must show, read before the keys are timed
            texts = {q[:n] for q in FILTERS for n in range(len(q) + 1)}
            expected = {q: ([r.id for r in history.runs(PAGE, 0, q)], history.count(q)) for q in texts}

        def shows(text: str) -> Callable[[], bool]:
            ids, total = expected[text]
            return lambda: (pane.search == text and not pane.filter_pending and pane.total == total
                            and [r.id for r in pane.rows] == ids)  # fmt: skip

        app.query_one("#history-filter").focus()
        await pilot.pause()
        for query in FILTERS:
            for n in range(1, len(query) + 1):
                keys["type"].append(await answered(app, await send(app, query[n - 1]), shows(query[:n])))
            for n in range(len(query) - 1, -1, -1):
                keys["delete"].append(await answered(app, await send(app, "backspace"), shows(query[:n])))
        figures["filters"] = {q: expected[q][1] for q in FILTERS}

        table.focus()
        await pilot.pause()
        for key, kind, until in (
            ("pagedown", "page_down", PAGES * PAGE),
            ("down", "down", (PAGES + 1) * PAGE + 5),
        ):
            while table.cursor_row < until:

                def moved(before: int = table.cursor_row) -> bool:
                    """The cursor moved; on the last row read, the next rows are there too."""
                    row, read = table.cursor_row, len(pane.rows)
                    return row > before and (row < read - 1 or read == pane.total)

                keys[kind].append(await answered(app, await send(app, key), moved))
        figures["rows_read"] = len(pane.rows)

        for run in pane.rows[7 :: len(pane.rows) // REOPENED][:REOPENED]:
            with History() as history:
                config = history.load(run.id).config
            if tabs.active != "tab-history":
                await pilot.press("f2")
            table.focus()
            table.move_cursor(row=[r.id for r in pane.rows].index(run.id))
            await pilot.pause()
            before = app.result

            def opened(before=before, config=config) -> bool:
                """Its result in the panes, its configuration in the form (read once the result is)."""
                return (
                    app.result is not before and app.result.config == config and app.form.read()[0] == config
                )

            keys["reopen"].append(await answered(app, await send(app, "enter"), opened))
    figures["target_ms"] = TARGET_MS
    figures["keys_ms"] = {kind: summary(times) for kind, times in keys.items()}
    figures["over_target"] = sorted(k for k, s in figures["keys_ms"].items() if s["max_ms"] > TARGET_MS)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs generated in the history")
    parser.add_argument("--freeze-gc", action="store_true", help="gc.freeze() once the dashboard is up")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="history-pane-") as folder:
        os.environ["SDPA_EXPLORER_DATA_DIR"] = os.path.join(folder, "data")
        os.environ["SDPA_EXPLORER_PRESET_DIR"] = os.path.join(folder, "presets")  # the built-ins only
        os.makedirs(os.environ["SDPA_EXPLORER_DATA_DIR"])
        load = os.getloadavg()[0]
        figures = asyncio.run(measure(args.runs, args.freeze_gc))
        figures["freeze_gc"] = args.freeze_gc
        figures["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]  # at start and end
        figures["cpus"] = os.cpu_count()
    print(json.dumps(figures, indent=1))
    for kind, s in figures["keys_ms"].items():
        verdict = "ok" if s["max_ms"] <= TARGET_MS else "OVER"
        print(f"{kind:>10}: {s['keys']:3} keys, median {s['median_ms']} ms, p90 {s['p90_ms']} ms, "
              f"max {s['max_ms']} ms (UI thread CPU, median {s['cpu_median_ms']} ms)  "
              f"[{verdict} against {TARGET_MS:.0f} ms]")  # fmt: skip
    save(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
