import dataclasses
import json
import re
from pathlib import Path

import pytest

from tui.model.results import RunResult
from tui.model.statuses import BACKWARD, FORWARD, SCHEMA_VERSION

DATA = Path(__file__).parent / "data"
RECORDED = RunResult.from_json((DATA / "seed_h200.json").read_text())  # schema 1.0, as recorded on the H200
TRAINING = RunResult.from_json((DATA / "train_h200.json").read_text())  # schema 1.1, with a backward


def with_forward(result: RunResult, **changes) -> RunResult:
    return dataclasses.replace(
        result, passes=(dataclasses.replace(result.forward, **changes), *result.passes[1:])
    )


def test_autotune_verdict_of_the_recorded_result():
    fwd = RECORDED.forward
    verdict = fwd.autotune_verdict()
    assert verdict.startswith("plan 5 (eng2) is ") and "% faster than the heuristic's pick" in verdict
    same = with_forward(RECORDED, fastest_plan=fwd.heuristic_plan).forward
    assert same.autotune_verdict() == "the heuristic's pick is the fastest of 6 timed plans"
    assert with_forward(RECORDED, plans=fwd.plans[:1]).forward.autotune_verdict() == ""


def test_a_schema_1_0_file_reads_as_one_forward_pass():
    data = json.loads((DATA / "seed_h200.json").read_text())
    assert data["schema_version"] == "1.0" and RECORDED.schema_version == SCHEMA_VERSION
    (fwd,) = RECORDED.passes
    assert fwd.kind == FORWARD and fwd.status == "ok"
    assert fwd.timing.median_us == data["timing"]["median_us"] and fwd.flops == data["flops"]
    assert [p.name for p in fwd.phases] == [p["name"] for p in data["phases"]]
    (check,) = fwd.checks
    acc = data["accuracy"]
    assert (check.output, check.atol, check.rtol) == ("O", acc["atol"], acc["rtol"])
    assert check.cudnn.max_abs == acc["cudnn"]["max_abs"] and check.passed
    assert check.peers["torch fp16"].max_abs == acc["torch_lowp"]["max_abs"]
    assert fwd.peers == {"torch fp16": acc["torch_backend"]} and fwd.check_device == "cuda"
    assert RECORDED.step_us is None


def test_a_schema_1_1_training_step_reads_as_two_passes():
    data = json.loads((DATA / "train_h200.json").read_text())
    b = data["backward"]
    fwd, bwd = TRAINING.passes
    assert (fwd.kind, bwd.kind) == (FORWARD, BACKWARD) and TRAINING.pass_of(BACKWARD) is bwd
    assert [c.output for c in bwd.checks] == ["dQ", "dK", "dV"]
    for c in bwd.checks:
        assert c.atol == b["atol"][c.output] and c.rtol == b["rtol"]
        assert c.cudnn.max_abs == b["gradients"][c.output]["max_abs"]
        assert c.peers["torch bf16"].max_abs == b["torch_gradients"][c.output]["max_abs"]
    assert bwd.repeatable is b["bitwise_repeatable"] and bwd.deterministic is False
    assert bwd.flops == b["flops"] and "2.5x" in bwd.flops_rule
    assert TRAINING.step_us == pytest.approx(data["timing"]["median_us"] + b["timing"]["median_us"])


def test_schema_2_round_trip_and_a_newer_major_is_refused():
    for result in (RECORDED, TRAINING):
        again = RunResult.from_json(result.to_json())
        assert again == result
    data = json.loads(TRAINING.to_json())
    assert data["schema_version"] == SCHEMA_VERSION == "2.7" and len(data["passes"]) == 2
    data["schema_version"] = "3.0"
    with pytest.raises(ValueError, match="schema 3.0"):
        RunResult.from_dict(data)


def test_a_21_timing_keeps_its_regime_samples_verdict_and_telemetry_through_json():
    from tui.model.results import GpuState, Telemetry

    before = GpuState(
        sm_clock_mhz=1980, mem_clock_mhz=3201, power_w=120.0, power_limit_w=700.0, temperature_c=38
    )
    after = dataclasses.replace(before, sm_clock_mhz=1755, power_w=699.0, reasons=("sw power cap",))
    fwd = RECORDED.forward
    timing = dataclasses.replace(
        fwd.timing,
        regime="sustained",
        samples_us=(1935.0, 1950.5, 2004.0),
        stable=False,
        retried=True,
        l2_flush_bytes=100 << 20,
        cross_check="replay 2100.00 µs per execution against a kernel sum of 1950.00 µs: launch gaps",
        telemetry=Telemetry(before, after, seconds=2.1, power_capped_pct=40.4, thermal_capped_pct=0.0),
    )
    result = dataclasses.replace(RECORDED, passes=(dataclasses.replace(fwd, timing=timing),))
    again = RunResult.from_json(result.to_json())
    assert again == result and again.forward.timing.telemetry.after.reasons == ("sw power cap",)
    assert again.forward.timing.regime_words.startswith("sustained, unstable (p90/p10 ")
    assert again.forward.timing.regime_words.endswith("power-capped 40%")


def test_a_failed_output_is_the_worst_check_and_fails_the_pass():
    from tui.model.results import ErrorMetrics

    bwd = TRAINING.pass_of(BACKWARD)
    bad = ErrorMetrics(max_abs=3.0, max_rel=9.0, mean_abs=0.1, mismatched=17, total=100)
    checks = tuple(dataclasses.replace(c, cudnn=bad) if c.output == "dK" else c for c in bwd.checks)
    failing = dataclasses.replace(bwd, checks=checks)
    assert failing.passed is False and failing.worst_check().output == "dK"
    assert bwd.passed is True and bwd.worst_check() is None


def test_cli_report_of_a_gpu_result_renders_every_section():
    """The CLI's report of a real H200 result: CI has no GPU, so this is where it is drawn."""
    from rich.console import Console

    from tui.present.report import result_renderable

    console = Console(record=True, width=200)
    console.print(result_renderable(RECORDED))
    text = console.export_text()
    for words in (
        "OK",
        "kernel time 26.78 µs",
        "host overhead per execute()",
        "240.8 TFLOPS",
        "autotune: plan 5 (eng2)",
        "create_execution_plans",
        "eng2_k24=7",
        "KERNEL_CFG=7",
        "torch fp16",
        "pass",
    ):
        assert words in text, words


def test_timing_summary_statistics():
    from tui.engine.timing import summarize

    stats = summarize([5.0, 1.0, 3.0, 2.0, 4.0], per_replay=10, l2_flushed=False, method="m")
    assert (stats.median_us, stats.min_us, stats.max_us) == (3.0, 1.0, 5.0)
    assert stats.p10_us == 1.4 and stats.p90_us == 4.6
    assert stats.replays == 5 and stats.spread_pct == (4.6 - 1.4) / 3.0 * 100


def test_a_schema_2_recording_and_an_upgraded_1_1_one_have_the_same_shape():
    """The same preset recorded on the H200 by schema 1.1 and by schema 2.0: the upgrade gives
    the passes, outputs and peers the engine now writes."""
    now = RunResult.from_json((DATA / "train_h200_v2.json").read_text())
    assert json.loads((DATA / "train_h200_v2.json").read_text())["schema_version"] == "2.0"
    assert now.config == TRAINING.config
    for new, old in zip(now.passes, TRAINING.passes, strict=True):
        assert (new.kind, new.status, new.flops, new.io_bytes) == (
            old.kind,
            old.status,
            old.flops,
            old.io_bytes,
        )
        assert [c.output for c in new.checks] == [c.output for c in old.checks]
        assert [set(c.peers) for c in new.checks] == [set(c.peers) for c in old.checks]
        assert new.peers == old.peers and new.reference == old.reference and new.flops_rule == old.flops_rule
        assert new.timing.median_us == pytest.approx(old.timing.median_us, rel=0.1)  # two runs, one GPU


@pytest.mark.parametrize(
    "text,words",
    [
        ("[1, 2]", "a saved result is a JSON object, not a list"),
        ("null", "a saved result is a JSON object, not null"),
        ('"x"', "a saved result is a JSON object, not text"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
        ('{"schema_version": "1.0", "config": [1]}', "config must be an object, not a list"),
        (
            '{"schema_version": "1.0", "config": {}, "accuracy": [1]}',
            "a schema 1.0 result of the wrong shape",
        ),
        ('{"schema_version": "2.5", "config": [1], "status": "ok"}', "config must be an object, not a list"),
        (
            '{"schema_version": "2.5", "config": {}, "status": "ok", "environment": [1]}',
            "environment must be an object",
        ),
        (
            '{"schema_version": "2.5", "config": {}, "status": "ok", "errors": [[1]]}',
            "errors[0] must be an object",
        ),
        (
            '{"schema_version": "2.5", "config": {}, "status": "ok", "wall_seconds": true}',
            "wall_seconds must be a number",
        ),
        ('{"schema_version": "2.5", "config": {}, "status": "ok", "later": 1}', "unknown field 'later'"),
        ('{"schema_version": "2.5", "config": {}}', "status is missing"),
    ],
    ids=["list", "null", "text", "deep", "config-1", "accuracy-1", "config-2", "environment", "errors", "seconds",
         "unknown", "missing"],
)  # fmt: skip
def test_a_result_of_the_wrong_shape_is_a_result_error_naming_the_field(text, words):
    """Never an AttributeError or a RecursionError: the reader's own error, which a ValueError is."""
    from tui.model.results import ResultError

    with pytest.raises(ResultError, match=re.escape(words)):
        RunResult.from_json(text)


def test_the_fp64_cross_check_round_trips_and_a_2_6_file_reads_without_it():
    """OutputCheck.fp64 and reference_fp64 (schema 2.7) are written and read back; a 2.6 file
    (no such keys) reads with both at None; RunOptions.cross_check round-trips and is an option."""
    from tui.model.options import OPTION, RunOptions, options_from
    from tui.model.results import ErrorMetrics

    fp64 = ErrorMetrics(max_abs=2e-3, max_rel=1e-2, mean_abs=1e-4, mismatched=3, total=64)
    ref = ErrorMetrics(max_abs=1e-7, max_rel=1e-6, mean_abs=1e-8, mismatched=0, total=64)
    checks = tuple(dataclasses.replace(c, fp64=fp64, reference_fp64=ref) for c in TRAINING.forward.checks)
    crossed = with_forward(TRAINING, checks=checks)
    again = RunResult.from_json(crossed.to_json())
    assert again == crossed and again.forward.checks[0].fp64 == fp64
    assert again.forward.checks[0].reference_fp64.passed and not again.forward.checks[0].fp64.passed
    old = json.loads(TRAINING.to_json())
    old["schema_version"] = "2.6"
    for p in old["passes"]:
        for c in p["checks"]:
            del c["fp64"], c["reference_fp64"]
    read = RunResult.from_dict(old)
    assert read.schema_version == SCHEMA_VERSION and all(c.fp64 is None for c in read.forward.checks)
    options = options_from({"cross_check": True})
    assert options.cross_check and RunOptions.from_dict(options.to_dict()) == options
    assert OPTION["cross_check"].flag == "--cross-check/--no-cross-check" and not RunOptions().cross_check
