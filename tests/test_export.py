"""Exports: the reproduction script run on the GPU as a user runs it, against the engine (its parts
are proven on the CPU in test_repro.py), the RunResult as JSON and the plans as CSV."""

import ast
import csv
import io
from pathlib import Path

import pytest
from fakes import TRAINING
from measured import measured

from tui.model.config import SdpaConfig
from tui.model.results import RunResult
from tui.model.statuses import SCHEMA_VERSION
from tui.present.export import PLAN_COLUMNS, default_filename, render

RECORDED = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())
TUI = Path(__file__).parents[1] / "tui"


def shape(b, h_q, h_kv, s_q, s_kv, d_qk, d_v, **options) -> SdpaConfig:
    """A configuration written as its shape (b, h_q, h_kv, s_q, s_kv, d_qk, d_v), then its options."""
    return SdpaConfig(b=b, h_q=h_q, h_kv=h_kv, s_q=s_q, s_kv=s_kv, d_qk=d_qk, d_v=d_v, **options)


def test_no_string_literal_in_the_package_is_longer_than_60_lines():
    long = []
    for path in sorted(TUI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            is_text = isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.Constant) and isinstance(node.value, str)
            )
            if is_text and node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{path.relative_to(TUI.parent)}:{node.lineno}")
    assert not long


# ---- on the GPU: the script, run as a user runs it, agrees with the engine ------------------------

SIX = {
    "seed": SdpaConfig(),
    "gqa-window": shape(2, 32, 8, 2048, 2048, 128, 128, dtype="bf16", window=256),
    "paged-decode": shape(8, 32, 8, 1, 4096, 128, 128, dtype="bf16", causal="bottom_right", page_size=64,
                          seq_lens_q=(1,) * 8, seq_lens_kv=(4096, 1000, 3000, 17, 4096, 2048, 999, 64)),
    "thd": shape(4, 16, 4, 1024, 1024, 128, 128, dtype="bf16", layout="THD",
                 seq_lens_q=(1024, 300, 777, 64), seq_lens_kv=(1024, 300, 777, 64)),
    "fp8": shape(2, 16, 16, 1024, 1024, 128, 128, dtype="fp8_e4m3", causal="none"),
    "backward": shape(2, 16, 4, 1024, 1024, 128, 128, dtype="bf16", backward=True, deterministic=True),
}  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("config", list(SIX.values()), ids=list(SIX))
def test_the_script_builds_the_engines_graph_and_reports_its_error(tmp_path, config):
    """The same graph JSON as the engine's, the same error of every output it checks to 1e-6, and a
    kernel time near the engine's."""
    from exported import assert_script_agrees

    from tui.engine.runner import Engine, RunOptions

    r = Engine(cache_size=1).run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    assert_script_agrees(tmp_path, r, error_abs=1e-6)


# ---- JSON and CSV ------------------------------------------------------------------------------------


def test_json_export_round_trips():
    assert RunResult.from_json(render("json", RECORDED)) == RECORDED


def test_csv_export_has_every_plan_of_every_pass_and_the_environment():
    rows = list(csv.DictReader(io.StringIO(render("csv", RECORDED))))
    assert len(rows) == sum(len(p.plans) for p in RECORDED.passes)
    assert set(PLAN_COLUMNS) <= set(rows[0])
    assert all(r["gpu_name"] == "NVIDIA H200" and r["cudnn_backend_version"] == "9.19.0" for r in rows)
    heuristic = [r for r in rows if r["heuristic_pick"] == "True"]
    assert len(heuristic) == 1 and float(heuristic[0]["kernel_median_us"]) > 0
    assert rows[0]["schema_version"] == SCHEMA_VERSION and {r["pass"] for r in rows} == {"forward"}


# the columns of a CSV before schema 2.1, in their places: a reader of those files finds them still
COLUMNS_BEFORE_21 = (
    "config", "dtype", "layout", "pass", "plan_index", "plan_name", "engine_id", "knobs", "workspace_bytes",
    "built", "build_error", "build_seconds", "kernel_median_us", "kernel_p10_us", "kernel_p90_us",
    "l2_flushed", "tflops", "max_abs_error", "matches", "heuristic_pick", "fastest", "gpu_name",
    "compute_capability", "driver_version", "cuda_runtime", "torch_version", "cudnn_backend_version",
    "torch_cudnn_version", "frontend_version", "schema_version",
)  # fmt: skip
TIMING = ("regime", "stable", "retried", "samples")
GPU = ("sm_clock_after_mhz", "power_after_w", "power_limit_w", "power_capped_pct", "thermal_capped_pct")
SOURCE = ("source",)  # schema 2.4: where each plan comes from


def csv_rows(result: RunResult) -> tuple[list[str], list[dict[str, str]]]:
    header, *rows = csv.reader(io.StringIO(render("csv", result)))
    return header, [dict(zip(header, row, strict=True)) for row in rows]


def test_csv_keeps_its_columns_in_place_and_appends_how_each_figure_was_taken():
    header, rows = csv_rows(measured(TRAINING, unstable=("backward",)))
    assert tuple(header) == (*COLUMNS_BEFORE_21, *TIMING, *GPU, *SOURCE, "status", "message")
    picks = {r["pass"]: r for r in rows if r["heuristic_pick"] == "True"}
    assert [picks[k][c] for k in ("forward", "backward") for c in TIMING] == [
        "sustained", "True", "False", "20", "sustained", "False", "True", "20"
    ]  # fmt: skip
    assert [picks["backward"][c] for c in GPU] == ["1755", "699.0", "700.0", "38.2", "0.0"]
    assert all(r["regime"] == "sustained" and r["samples"] == "20" for r in rows)  # every plan was timed


def test_csv_of_an_older_or_unmeasured_figure_leaves_the_new_columns_blank():
    _, rows = csv_rows(RECORDED)  # schema 1.x: no regime, samples or telemetry recorded
    assert rows and all(r[c] == "" for r in rows for c in (*TIMING, *GPU))
    _, rows = csv_rows(measured(TRAINING, regime="burst", telemetry=None, unstable=()))  # no NVML
    assert all(r["regime"] == "burst" and r["stable"] == "True" for r in rows)
    assert all(r[c] == "" for r in rows for c in GPU)


def test_default_filenames_are_safe():
    name = default_filename(SdpaConfig(h_q=32, h_kv=8), "script")
    assert name.endswith(".py") and "/" not in name and " " not in name
    with pytest.raises(ValueError):
        render("pdf", RECORDED)


def test_csv_says_where_each_plan_comes_from_and_a_peer_comes_from_no_engine():
    import dataclasses

    from fakes import PEERS

    from tui.model.results import PLAN_SOURCES

    fwd = PEERS.forward
    plans = tuple(dataclasses.replace(p, source=PLAN_SOURCES[1]) if p.index == 0 else p for p in fwd.plans)
    _, rows = csv_rows(dataclasses.replace(PEERS, passes=(dataclasses.replace(fwd, plans=plans),)))
    plan_rows = [r for r in rows if r["engine_id"] != "peer"]
    assert [r["source"] for r in plan_rows] == [PLAN_SOURCES[1]] + [PLAN_SOURCES[0]] * (len(plans) - 1)
    assert {r["source"] for r in rows if r["engine_id"] == "peer"} == {""}


def test_csv_of_a_run_without_plans_says_its_configuration_status_and_why():
    """A CPU-only run, a refusal or an invalid configuration has no plan: a row a pass (or one for
    the run) still names the configuration, the status and the message."""
    from fakes import NO_GPU

    from tui.engine.runner import Engine
    from tui.model.config import SdpaConfig
    from tui.model.options import RunOptions

    small = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64, backward=True)
    cpu = Engine(environment=NO_GPU).run(small, RunOptions(check=False))
    _, rows = csv_rows(cpu)
    assert [(r["config"], r["pass"], r["status"]) for r in rows] == [
        (small.label(), "forward", "cpu_only"), (small.label(), "backward", "cpu_only")
    ]  # fmt: skip
    assert {r["message"] for r in rows} == {cpu.message} and cpu.message.startswith("GPU figures unavailable")
    invalid = Engine(environment=NO_GPU).run(small.replace(h_kv=3))
    (row,) = csv_rows(invalid)[1]
    assert row["status"] == "invalid" and "h_q must be a multiple of h_kv" in row["message"]
    _, rows = csv_rows(RECORDED)
    assert {r["status"] for r in rows} == {"ok"}  # a measured pass's status on each of its plans
