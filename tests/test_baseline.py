"""`check --save-baseline` and `check --baseline`: the regression check after an upgrade. A case
slower by more than max(5%, the two runs' combined p10-p90 spread) in the same regime, or newly
failing, is flagged and the check exits 1; an unchanged re-run passes; a case timed in another
regime is not comparable, never flagged; the environment's changes are named."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from click.testing import CliRunner
from fakes import RECORDED, TRAINING, FakeEngine, refused, relabelled
from test_history import timed

from tui.cli import common as cli
from tui.cli.main import main
from tui.jobs import fleet
from tui.model.results import RunResult
from tui.process.session import EngineSession
from tui.store.baseline import (
    FAILING,
    MIN_SLOWER_PCT,
    NOT_COMPARABLE,
    SLOWER,
    WITHIN,
    BaselineError,
    judge_case,
    read_baseline,
    save_baseline,
)
from tui.store.places import DATA_DIR_ENV

CASES = ("--preset", "gpt2-seed", "--preset", "llama3-8b-decode")


@pytest.fixture(autouse=True)
def own_history(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))


def answering(monkeypatch, result: RunResult = RECORDED, answer=None) -> FakeEngine:
    """The check's engine: `result` relabelled for every case asked."""
    fake = FakeEngine(answer or relabelled(result), environment=result.environment)
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    return fake


def check(*args):
    return CliRunner().invoke(main, ["check", *CASES, *args])


def baseline_of(tmp_path, monkeypatch, result: RunResult = RECORDED) -> str:
    """A baseline saved by `check --save-baseline` from engines answering `result`."""
    path = str(tmp_path / "base.json")
    answering(monkeypatch, result)
    out = check("--save-baseline", path)
    assert out.exit_code == 0, out.output
    return path


def with_regime(result: RunResult, regime: str) -> RunResult:
    f = result.forward
    return dataclasses.replace(
        result, passes=(dataclasses.replace(f, timing=dataclasses.replace(f.timing, regime=regime)),)
    )


def test_the_saved_baseline_holds_every_cases_whole_result(tmp_path, monkeypatch):
    path = baseline_of(tmp_path, monkeypatch)
    baseline = read_baseline(path)
    assert [name for name, _ in baseline.cases] == ["gpt2-seed", "llama3-8b-decode"]
    assert baseline.cases[0][1] == RECORDED  # gpt2-seed is the recording's own configuration
    assert baseline.cases[1][1].forward == RECORDED.forward and baseline.created


def test_an_unchanged_rerun_passes(tmp_path, monkeypatch):
    path = baseline_of(tmp_path, monkeypatch)
    out = check("--baseline", path)
    assert out.exit_code == 0, out.output
    assert "0 slower; 0 started failing; 2 within" in out.output
    assert "environment: the same GPU, driver, CUDA, torch, cuDNN and frontend" in out.output


def test_a_case_made_20_percent_slower_is_flagged_and_exits_1(tmp_path, monkeypatch):
    path = baseline_of(tmp_path, monkeypatch, timed(RECORDED, 1 / 1.2))  # the baseline ran faster
    answering(monkeypatch, RECORDED)
    out = check("--baseline", path)
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("SLOWER")]
    assert len(lines) == 2 and all("+20.0%" in line and "allowed 5.0%, burst" in line for line in lines)
    assert lines[0].startswith("SLOWER gpt2-seed b4 h12 s1024 d64 fp16 BSHD causal forward: 22.35 µs then")
    assert "2 passed, 0 failed" in out.output.splitlines()[-1]  # the cases passed; the baseline failed it
    data = json.loads(check("--baseline", path, "--json").output)
    assert data["baseline"]["flagged"] == 2 and data["passed"] == 2
    flagged = [v for v in data["baseline"]["verdicts"] if v["verdict"] == SLOWER]
    assert [round(v["change_pct"], 1) for v in flagged] == [20.0, 20.0]


def test_a_case_timed_in_another_regime_is_not_comparable_not_flagged(tmp_path, monkeypatch):
    path = baseline_of(tmp_path, monkeypatch, with_regime(timed(RECORDED, 1 / 1.2), "sustained"))
    answering(monkeypatch, RECORDED)
    out = check("--baseline", path)
    assert out.exit_code == 0, out.output
    assert "2 not comparable" in out.output and "SLOWER" not in out.output
    assert (
        "NOT COMPARABLE gpt2-seed b4 h12 s1024 d64 fp16 BSHD causal forward: regime sustained then, burst now"
        in out.output
    )


def test_a_case_that_started_failing_is_flagged_and_the_environment_change_named(tmp_path, monkeypatch):
    older = dataclasses.replace(RECORDED.environment, cudnn_backend_version="9.18.1", driver_version="575.1")
    path = baseline_of(tmp_path, monkeypatch, dataclasses.replace(RECORDED, environment=older))
    answering(monkeypatch, answer=refused())
    out = check("--baseline", path)
    assert out.exit_code == 1
    assert (
        "FAILING gpt2-seed b4 h12 s1024 d64 fp16 BSHD causal: ok then, unsupported now: validate: hidden_dim"
        in out.output
    )
    assert "2 started failing" in out.output


def test_environment_changes_are_named(tmp_path, monkeypatch):
    older = dataclasses.replace(RECORDED.environment, cudnn_backend_version="9.18.1", driver_version="575.1")
    path = baseline_of(tmp_path, monkeypatch, dataclasses.replace(RECORDED, environment=older))
    answering(monkeypatch, RECORDED)
    out = check("--baseline", path)
    assert out.exit_code == 0
    assert "environment changed: driver 575.1 → 580.159.04, cuDNN 9.18.1 → 9.19.0" in out.output


@pytest.mark.parametrize(
    "slower_pct,spread_pct,flagged",
    [(4.0, 0.5, False), (6.0, 0.5, True), (10.0, 6.0, False), (13.0, 6.0, True)],
)
def test_slower_means_past_five_percent_or_the_combined_spread(slower_pct, spread_pct, flagged):
    """spread_pct is each run's p10-p90 width: the two together are the allowance when over 5%."""

    def spread(result: RunResult, median: float) -> RunResult:
        f = result.forward
        half = median * spread_pct / 200
        t = dataclasses.replace(f.timing, median_us=median, p10_us=median - half, p90_us=median + half)
        return dataclasses.replace(result, passes=(dataclasses.replace(f, timing=t),))

    (verdict,) = judge_case("gpt2-seed", spread(RECORDED, 100.0), spread(RECORDED, 100.0 + slower_pct))
    assert verdict.flagged is flagged and verdict.verdict == (SLOWER if flagged else WITHIN)
    assert verdict.allowed_pct == pytest.approx(max(MIN_SLOWER_PCT, 2 * spread_pct))
    assert verdict.change_pct == pytest.approx(slower_pct)


def test_each_pass_of_a_training_step_is_judged():
    verdicts = judge_case("llama3-8b-train", TRAINING, timed(TRAINING, 1.3, kind="backward"))
    assert [(v.kind, v.verdict) for v in verdicts] == [("forward", WITHIN), ("backward", SLOWER)]
    (failing,) = judge_case("x", TRAINING, dataclasses.replace(TRAINING, status="mismatch", message="dQ"))
    assert failing.verdict == FAILING and failing.why == "ok then, mismatch now: dQ"
    (no_time,) = judge_case("x", dataclasses.replace(TRAINING, passes=()), RECORDED)
    assert no_time.verdict == NOT_COMPARABLE and no_time.why == "no kernel time in the baseline"


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "cannot read"),
        ("not json", "is not JSON"),
        ('{"hello": 1}', "is not a baseline"),
        (
            '{"kind": "sdpa-explorer check baseline", "version": 1, "cases": [{"case": "x"}]}',
            "a case cannot be read",
        ),
    ],
)
def test_an_unreadable_baseline_exits_2_before_anything_runs(tmp_path, monkeypatch, content, needle):
    path = tmp_path / "base.json"
    if content is not None:
        path.write_text(content)
    fake = answering(monkeypatch)
    out = check("--baseline", str(path))
    assert out.exit_code == 2 and out.output.startswith("Error: --baseline: ") and needle in out.output
    assert out.output.count("\n") == 1 and fake.requests == []
    with pytest.raises(BaselineError):
        read_baseline(str(path))


def test_a_baseline_cannot_be_saved_in_a_missing_folder_said_before_anything_runs(tmp_path, monkeypatch):
    fake = answering(monkeypatch)
    out = check("--save-baseline", str(tmp_path / "nowhere" / "base.json"))
    assert out.exit_code == 2 and "--save-baseline: cannot write" in out.output and fake.requests == []


def test_baselines_and_several_gpus_are_refused_together(tmp_path, monkeypatch):
    save_baseline(str(tmp_path / "base.json"), [("gpt2-seed", RECORDED)])
    monkeypatch.setattr(fleet, "visible_gpus", lambda: 2)
    out = check("--gpus", "all", "--baseline", str(tmp_path / "base.json"))
    assert out.exit_code == 2
    assert (
        "--baseline check one GPU, not --gpus: run it once per GPU, with CUDA_VISIBLE_DEVICES=N" in out.output
    )


def test_a_check_of_only_some_presets_counts_the_baseline_cases_it_did_not_run(tmp_path, monkeypatch):
    path = baseline_of(tmp_path, monkeypatch)
    out = CliRunner().invoke(main, ["check", "--preset", "gpt2-seed", "--baseline", path])
    assert out.exit_code == 0 and "1 baseline case(s) not run by this check" in out.output


def test_check_quick_runs_the_smoke_set_over_few_replays(monkeypatch):
    from tui.jobs.check import QUICK_REPLAYS, SMOKE_CASES

    fake = answering(monkeypatch)
    out = CliRunner().invoke(main, ["check", "--quick"])
    assert out.exit_code == 0, out.output
    assert [config for config, _options in fake.requests] == list(SMOKE_CASES)
    assert all(options.timing.replays == QUICK_REPLAYS for _config, options in fake.requests)
    refused_combination = check("--quick")  # CASES names presets
    assert refused_combination.exit_code == 2 and "--quick" in refused_combination.output


def test_a_preset_pinned_to_a_slower_plan_is_the_same_case_and_is_flagged(tmp_path, monkeypatch):
    """The regression a pin can cause: the preset's problem is unchanged, its plan is another."""
    from tui.store.presets import find, save_user

    path = baseline_of(tmp_path, monkeypatch)
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path / "presets"))
    save_user("llama3-8b-decode", find("llama3-8b-decode").config.replace(plan="1 KERNEL_CFG=2"))
    answering(monkeypatch, timed(RECORDED, 1.35))
    out = check("--baseline", path)
    assert out.exit_code == 1, out.output
    pinned = [line for line in out.output.splitlines() if line.startswith("SLOWER llama3-8b-decode")]
    assert len(pinned) == 1 and "plan[1 KERNEL_CFG=2]" in pinned[0] and "+35.0%" in pinned[0], out.output
    assert "not in the baseline" not in out.output


KIND = '{"kind": "sdpa-explorer check baseline", "version": 1, '


@pytest.mark.parametrize(
    "content,needle",
    [
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply to read"),
        ("[1, 2]", "is not a baseline"),
        ("null", "is not a baseline"),
        ('"x"', "is not a baseline"),
        (KIND + '"cases": 5}', "a case cannot be read: cases: must be a list"),
        (
            KIND + '"cases": [{"case": ["x"], "result": {}}]}',
            "a case cannot be read: cases[0].case: must be text",
        ),
        (
            KIND + '"cases": [{"case": "x", "result": [1]}]}',
            "a case cannot be read: cases[0].result: must be an object",
        ),
        (
            KIND
            + '"cases": [{"case": "x", "result": {"schema_version": "2.5", "config": [1], "status": "ok"}}]}',
            "config must be an object",
        ),
        (KIND + '"cases": [{"case": "x", "result": ' + "[" * 70 + "]" * 70 + "}]}", "is nested too deeply"),
    ],
    ids=["deep", "list", "null", "text", "cases", "case", "result", "config", "deep-result"],
)
def test_a_baseline_of_the_wrong_shape_exits_2_naming_it(tmp_path, monkeypatch, content, needle):
    path = tmp_path / "base.json"
    path.write_text(content)
    fake = answering(monkeypatch)
    out = check("--baseline", str(path))
    assert out.exit_code == 2 and out.output.startswith(f"Error: --baseline: {path}") and needle in out.output
    assert out.output.count("\n") == 1 and "Traceback" not in out.output and fake.requests == []


def test_a_baseline_that_is_a_fifo_or_a_device_is_refused_unread(tmp_path, monkeypatch):
    from fifos import invoke_given_fifo

    fake = answering(monkeypatch)
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    out, blocked = invoke_given_fifo(main, ["check", *CASES, "--baseline", str(fifo)], fifo)
    assert not blocked, "check waited on the FIFO"
    assert (
        out.exit_code == 2
        and out.output
        == f"Error: --baseline: cannot read {fifo}: not a regular file (a FIFO); only files are read\n"
    )
    out = check("--baseline", "/dev/zero")  # reading it would never end
    assert (
        out.exit_code == 2
        and "--baseline: cannot read /dev/zero: not a regular file (a character device)" in out.output
    )
    assert fake.requests == []
