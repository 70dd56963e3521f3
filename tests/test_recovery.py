"""When the GPU itself fails: known issues flagged before they run, a lost CUDA context named and
answered as a crash, the engine process restarted with the queued request, and `check` carried
through one session. CPU only: a machine without a driver stands in for a lost context (every
CUDA call fails there, as after an illegal address)."""

from __future__ import annotations

import dataclasses
import queue

import pytest
from click.testing import CliRunner

from tests.fakes import NO_GPU, RECORDED, FakeEngine, crash, lost_context, relabelled, replay
from tui.cli import check as check_command
from tui.cli import common as cli
from tui.cli.main import main
from tui.engine import faults
from tui.engine.runner import Engine, RunOptions
from tui.model import known_issues
from tui.model.config import SdpaConfig
from tui.model.results import Environment, RunResult
from tui.model.statuses import STATUS_CPU_ONLY, STATUS_CRASH, STATUS_ERROR, STATUS_KNOWN_ISSUE, STATUS_OK
from tui.model.validation import validate
from tui.process.client import (
    EXIT_CONTEXT_LOST,
    EngineClient,
    EngineDied,
    EngineReady,
    EngineResult,
    exit_reason,
)
from tui.process.session import EngineSession

FP8_DROPOUT = SdpaConfig(
    dtype="fp8_e4m3", dropout=0.1, b=2, h_q=4, h_kv=4, s_q=128, s_kv=128, d_qk=128, d_v=128
)


def hopper(cudnn: str = "9.19.0", cc: str = "9.0", gpu: bool = True) -> Environment:
    """An environment as the engine would report it; on this machine it has no driver behind it."""
    return dataclasses.replace(
        RECORDED.environment, gpu_available=gpu, cudnn_backend_version=cudnn, compute_capability=cc
    )


# ---- known issues ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "env", "keys"),
    [
        (FP8_DROPOUT, hopper(), ["fp8-dropout-hopper-cudnn-9.19"]),
        (FP8_DROPOUT, hopper("9.19.3"), ["fp8-dropout-hopper-cudnn-9.19"]),
        (FP8_DROPOUT, hopper("9.20.0"), []),
        (FP8_DROPOUT, hopper("9.26.0"), []),  # the locked environment's cuDNN: not measured, not flagged
        (FP8_DROPOUT, hopper(cc="10.0"), []),  # Blackwell
        (dataclasses.replace(FP8_DROPOUT, dropout=0.0), hopper(), []),
        (dataclasses.replace(FP8_DROPOUT, dtype="bf16"), hopper(), []),
        (FP8_DROPOUT, hopper(""), []),  # no cuDNN version to compare
        (FP8_DROPOUT, hopper("9.10.0"), ["fp8-forward-cudnn-9.10.0"]),
        (SdpaConfig(), hopper("9.10.1"), ["half-forward-cudnn-9.10.0-9.10.1"]),
        (SdpaConfig(), hopper("9.10.2"), []),
        (
            SdpaConfig(window=16, s_q=2048, s_kv=2048, causal="none"),
            hopper("9.14.0"),
            ["window-non-causal-cudnn-9.14.0"],
        ),
        (SdpaConfig(window=16, s_q=1024, s_kv=1024, causal="none"), hopper("9.14.0"), []),
        (SdpaConfig(window=16, s_q=2048, s_kv=2048), hopper("9.14.0"), []),  # causal
    ],
)
def test_known_issues_match_by_cudnn_version_architecture_and_features(config, env, keys):
    assert [m.key for m in known_issues.matching(config, env)] == keys


def test_every_known_issue_says_how_it_was_established_and_the_cli_docs_list_it():
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "docs" / "CLI.md").read_text(encoding="utf-8")
    for issue in known_issues.KNOWN_ISSUES:
        assert issue.outcome in known_issues.OUTCOMES
        assert len(issue.established) > 40 and issue.cudnn[0] < issue.cudnn[1]
        assert f"| `{issue.key}` |" in readme, issue.key


def test_a_known_issue_is_not_run_unless_asked_and_cpu_mode_only_marks_it():
    result = Engine(environment=hopper()).run(FP8_DROPOUT)  # nothing touches the GPU before this answer
    assert result.status == STATUS_KNOWN_ISSUE and result.passes == ()
    assert [m.key for m in result.known_issues] == ["fp8-dropout-hopper-cudnn-9.19"]
    assert "not run" in result.message and "illegal memory access" in result.message
    assert RunResult.from_json(result.to_json()) == result
    on_cpu = Engine(
        environment=dataclasses.replace(NO_GPU, cudnn_backend_version="9.19.0", compute_capability="9.0")
    )
    marked = on_cpu.run(FP8_DROPOUT, RunOptions(check=False))
    assert marked.status == STATUS_CPU_ONLY and [m.key for m in marked.known_issues] == [
        "fp8-dropout-hopper-cudnn-9.19"
    ]


# ---- a lost context -----------------------------------------------------------------------------------
def test_cuda_words_for_a_lost_context_are_sticky_and_others_are_not(monkeypatch):
    monkeypatch.setattr(faults, "usable", lambda: True)
    assert faults.sticky(
        RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors")
    )
    assert faults.sticky(RuntimeError("cudaErrorLaunchFailure: unspecified launch failure"))
    assert not faults.sticky(ValueError("hidden_dim should be multiple of 8"))
    monkeypatch.setattr(faults, "usable", lambda: False)  # whatever the words, a context that fails is lost
    assert faults.sticky(RuntimeError("CUDNN_STATUS_EXECUTION_FAILED"))


def test_execute_once_names_the_plan_whose_execution_lost_the_context(monkeypatch):
    monkeypatch.setattr(faults, "usable", lambda: True)

    def faulting() -> None:
        raise RuntimeError(
            "CUDA error: an illegal memory access was encountered\nCompile with TORCH_USE_CUDA_DSA"
        )

    with pytest.raises(faults.ContextLost) as lost:
        faults.execute_once(faulting, "the first execution of plan eng2_k24=32", "eng2_k24=32")
    assert lost.value.plan == "eng2_k24=32" and "eng2_k24=32" in lost.value.during
    assert lost.value.error == "RuntimeError: CUDA error: an illegal memory access was encountered"

    def refusing() -> None:
        raise ValueError("not a CUDA problem")

    with pytest.raises(ValueError):  # an ordinary failure stays what it is
        faults.execute_once(refusing, "checking", "eng0")


def test_an_engine_that_lost_its_context_answers_with_the_crash_then_runs_nothing():
    engine = Engine(environment=hopper("9.26.0"))  # it believes in a GPU; every CUDA call fails here
    first = engine.run(SdpaConfig(), RunOptions(check=False))
    assert first.status == STATUS_CRASH and first.crash is not None
    assert (
        first.crash.context_lost
        and first.crash.kind == "forward"
        and "building the forward" in first.crash.during
    )
    assert first.passes[0].status == STATUS_CRASH and first.message.startswith("crashed the GPU")
    assert RunResult.from_json(first.to_json()) == first
    after = engine.run(dataclasses.replace(SdpaConfig(), b=2))
    assert after.status == STATUS_ERROR and "runs nothing more" in after.message


def test_the_request_queued_behind_a_lost_context_runs_on_a_fresh_engine():
    """The real child: it answers the crash, exits, and the next child answers what was asked meanwhile."""
    events: queue.Queue = queue.Queue()
    client = EngineClient(environment_override=hopper(), log_file=None)
    client.start(events.put)
    try:
        ready = events.get(timeout=60)
        assert isinstance(ready, EngineReady) and ready.restarts == 0
        doomed = client.submit(SdpaConfig(), RunOptions(check=False))
        queued = None
        seen = []
        while True:
            event = events.get(timeout=60)
            seen.append(event)
            # asked as the crash is answered, while that engine exits: the request is in flight
            # with no engine to run it (a request made while the run goes on would stop it instead)
            if queued is None and isinstance(event, EngineResult) and event.request_id == doomed:
                queued = client.submit(FP8_DROPOUT, RunOptions())
            if isinstance(event, EngineResult) and event.request_id == queued:
                break
        results = {e.request_id: e.result for e in seen if isinstance(e, EngineResult)}
        assert results[doomed].status == STATUS_CRASH and results[queued].status == STATUS_KNOWN_ISSUE
        died = [e for e in seen if isinstance(e, EngineDied)]
        assert len(died) == 1 and died[0].context_lost and died[0].request_id is None
        assert died[0].reason == exit_reason(EXIT_CONTEXT_LOST)
        again = [e for e in seen if isinstance(e, EngineReady)]
        assert again[-1].restarts == 1 and again[-1].last_restart == died[0].reason
    finally:
        client.close()


def test_a_child_that_cannot_start_is_left_down_after_three_tries_and_a_request_tries_again():
    events: queue.Queue = queue.Queue()
    client = EngineClient(log_file=None)
    client._env_override = {"no such field": True}  # the child fails before it is ready
    client.start(events.put)
    try:
        died = [events.get(timeout=60) for _ in range(3)]
        assert all(isinstance(e, EngineDied) for e in died)
        assert [e.restarting for e in died] == [True, True, False]
        assert "failed to start 3 times in a row" in died[-1].reason
        assert events.empty() and client.restarts == 2
        client.submit(SdpaConfig(), RunOptions())  # the user asks again: one more start
        assert isinstance(events.get(timeout=60), EngineDied)
    finally:
        client.close()


# ---- the session and check ----------------------------------------------------------------------------
def test_a_session_answers_a_native_crash_with_a_crash_result_and_goes_on():
    fake = FakeEngine(relabelled(RECORDED)).then(crash())
    with EngineSession(fake) as session:
        assert session.ready() == RECORDED.environment
        lost = session.run(SdpaConfig(b=3), RunOptions())
        assert lost.status == STATUS_CRASH and lost.crash is not None and not lost.crash.context_lost
        assert "SIGSEGV" in lost.message and lost.crash.during == "building the forward"
        assert session.run(SdpaConfig(b=5), RunOptions()).status == STATUS_OK
        assert session.restarts == 1


def test_check_runs_every_case_through_one_session_and_a_crash_costs_only_its_case(monkeypatch, tmp_path):
    from tui.present import export

    cases = [("first", SdpaConfig(b=1)), ("boom", SdpaConfig(b=2)), ("after", SdpaConfig(b=3))]
    fake = FakeEngine(replay(RECORDED)).then(relabelled(RECORDED), lost_context())
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    monkeypatch.setattr(check_command, "check_cases", lambda names: cases)
    monkeypatch.setattr(export, "crash_folder", lambda: tmp_path)
    out = CliRunner().invoke(main, ["check"])
    assert out.exit_code == 1, out.output
    lines = out.output.splitlines()
    assert any(line.startswith("PASS first") for line in lines) and any(
        line.startswith("PASS after") for line in lines
    )
    assert any(line.startswith("FAIL boom") and "crash" in line for line in lines)
    assert "2 passed, 1 failed; the engine process was restarted 1 time(s)" in out.output
    scripts = list(tmp_path.glob("crash-*.py"))
    assert len(scripts) == 1 and "What it reproduces: this configuration crashed" in scripts[0].read_text()
    assert "eng2_k24=32" in scripts[0].read_text() and "cuDNN 9.19.0" in scripts[0].read_text()


def test_check_json_counts_the_restarts(monkeypatch, tmp_path):
    import json

    from tui.present import export

    fake = FakeEngine(replay(RECORDED)).then(lost_context())
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    monkeypatch.setattr(
        check_command, "check_cases", lambda names: [("boom", SdpaConfig(b=2)), ("after", SdpaConfig(b=3))]
    )
    monkeypatch.setattr(export, "crash_folder", lambda: tmp_path)
    out = CliRunner().invoke(main, ["check", "--json"])
    data = json.loads(out.stdout)
    assert (data["passed"], data["failed"], data["restarts"]) == (1, 1, 1)
    assert data["restart_reasons"] == [exit_reason(EXIT_CONTEXT_LOST)]
    assert [c["status"] for c in data["cases"]] == [STATUS_CRASH, STATUS_OK]


# ---- the soak's bookkeeping (the soak itself runs on the H200: benchmarks/soak.py) ---------------------
def test_the_soak_follows_every_fault_with_a_probe_and_judges_recovery_and_false_fails():
    import random

    from benchmarks import soak

    steps = soak.plan(200, random.Random(1))
    kinds = [kind for kind, _ in steps]
    assert kinds.count("run") == 200 and kinds.count("anyway") == 3
    for i, kind in enumerate(kinds):
        if kind not in ("run", "probe"):
            assert kinds[i + 1] == "probe" and steps[i + 1][1] == SdpaConfig()
    assert all(c.fp8 and c.dropout and not validate(c) for kind, c in steps if kind == "anyway")

    def r(i, kind, status, worst=None, atol=None):
        return {"request": i, "kind": kind, "status": status, "worst_max_abs": worst, "worst_atol": atol,
                "restarts": 1, "label": "x", "message": "", "memory": {"engine_gib": 1.0, "device_gib": 1.5}}  # fmt: skip

    good = soak.summary([r(1, "fault", STATUS_CRASH), r(2, "probe", STATUS_OK), r(3, "run", "mismatch", 1e-2, 1e-3)],
                        {"engine_gib": 1.5, "device_gib": 2.0}, 1.0)  # fmt: skip
    assert (
        good["all_recovered"]
        and good["memory_ok"]
        and good["false_fails"] == 0
        and len(good["mismatches"]) == 1
    )
    bad = soak.summary([r(1, "anyway", STATUS_CRASH), r(2, "probe", STATUS_ERROR), r(3, "run", "mismatch", 1e-4, 1e-3)],
                       {"engine_gib": 2.6, "device_gib": 3.0}, 1.0)  # fmt: skip
    assert not bad["all_recovered"] and not bad["memory_ok"] and bad["false_fails"] == 1
