"""`check --gpus` on simulated GPUs: one engine session per GPU, every case on each, one table,
and a GPU over 5% slower than its siblings' median on a case flagged (burst, stable figures only)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner
from fakes import RECORDED, FakeEngine, relabelled

from tui.cli.main import main
from tui.jobs import fleet
from tui.model.results import RunResult
from tui.process.child import visible_entry
from tui.process.session import EngineSession

CASES = ("--preset", "gpt2-seed", "--preset", "llama3-8b-decode")


def slower(result: RunResult, factor: float) -> RunResult:
    """The same result with the forward's kernel time `factor` times longer."""
    f = result.forward
    t = dataclasses.replace(f.timing, median_us=f.timing.median_us * factor)
    return dataclasses.replace(result, passes=(dataclasses.replace(f, timing=t), *result.passes[1:]))


def simulated(monkeypatch, answers: dict[int, object], count: int = 2) -> dict[int, FakeEngine]:
    """`count` visible GPUs; GPU i answered by answers.get(i) (else the H200's recording)."""
    envs = {i: dataclasses.replace(RECORDED.environment, gpu_index=i, gpu_uuid=f"GPU-{i}0000000-aaaa", host="node7")
            for i in range(count)}  # fmt: skip
    own = {i: relabelled(dataclasses.replace(RECORDED, environment=envs[i])) for i in range(count)}
    engines = {i: FakeEngine(answers.get(i, own[i]), environment=envs[i]) for i in range(count)}
    monkeypatch.setattr(fleet, "visible_gpus", lambda: count)
    monkeypatch.setattr(fleet, "gpu_session", lambda device: EngineSession(engines[device]))
    return engines


def check(*args):
    return CliRunner().invoke(main, ["check", *CASES, *args])


def test_every_gpu_runs_every_case_and_a_straggler_is_flagged(monkeypatch):
    engines = simulated(monkeypatch, {1: relabelled(slower(RECORDED, 1.10))}, count=3)
    out = check("--gpus", "all", "--json")
    assert out.exit_code == 1, out.output  # a straggler fails the check
    data = json.loads(out.output)
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2] and all(g["host"] == "node7" for g in data["gpus"])
    assert all(g["passed"] == 2 and g["failed"] == 0 for g in data["gpus"])
    assert [(s["gpu"], round(s["slower_pct"])) for s in data["stragglers"]] == [(1, 10), (1, 10)]  # each case
    assert all(len(e.requests) == 2 for e in engines.values())  # each GPU ran each case


def test_every_gpus_cases_are_kept_in_the_history(monkeypatch, tmp_path):
    from tui.store.history import History

    monkeypatch.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path))
    simulated(monkeypatch, {}, count=3)
    assert check("--gpus", "all").exit_code == 0
    with History() as history:
        rows = history.runs()
    assert len(rows) == 3 * 2 and {r.preset for r in rows} == {"gpt2-seed", "llama3-8b-decode"}
    assert check("--gpus", "all", "--no-history").exit_code == 0
    with History() as history:
        assert history.count() == 6


def test_within_five_percent_nothing_is_flagged_and_the_table_shows_each_gpu(monkeypatch):
    simulated(monkeypatch, {1: relabelled(slower(RECORDED, 1.04))})
    out = check("--gpus", "0,1")
    assert out.exit_code == 0, out.output
    assert "GPU 0" in out.output and "GPU 1" in out.output
    assert "STRAGGLER" not in out.output and "passed" in out.output and "2/2" in out.output


def test_only_burst_figures_that_held_still_are_compared(monkeypatch):
    f = RECORDED.forward
    shaky = dataclasses.replace(f.timing, stable=False, median_us=f.timing.median_us * 1.5)
    unstable = dataclasses.replace(RECORDED, passes=(dataclasses.replace(f, timing=shaky),))
    simulated(monkeypatch, {1: relabelled(unstable)})
    out = check("--gpus", "all", "--json")
    assert out.exit_code == 0 and json.loads(out.output)["stragglers"] == []


def test_a_failed_case_on_one_gpu_fails_the_check(monkeypatch):
    from fakes import refused

    simulated(monkeypatch, {0: refused()})
    out = check("--gpus", "all")
    assert out.exit_code == 1 and "FAIL unsupported" in out.output


@pytest.mark.parametrize(
    "text,needle", [("2", "GPU 2 is not one of the 2 visible"), ("x", "all, or GPU indices")]
)
def test_bad_gpus_exit_2_naming_the_option(monkeypatch, text, needle):
    simulated(monkeypatch, {})
    out = check("--gpus", text)
    assert out.exit_code == 2 and out.output.startswith("Error: --gpus: ") and needle in out.output


def test_an_engine_process_sees_only_its_gpu():
    assert visible_entry(None, 3) == "3"
    assert visible_entry("4,6", 1) == "6"
    assert visible_entry("GPU-aa, GPU-bb", 0) == "GPU-aa"
    with pytest.raises(LookupError):
        visible_entry("4", 1)


def test_a_sweep_spreads_its_points_over_the_gpus_each_point_once(monkeypatch, tmp_path):
    engines = simulated(monkeypatch, {}, count=2)
    out = tmp_path / "s.jsonl"
    sweep = ["sweep", "--b", "1", "--h", "2", "--no-autotune", "--vary", "s=64..2048x2", "--gpus", "all"]
    result = CliRunner().invoke(main, [*sweep, "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["varied"]["s"] for r in rows) == [64, 128, 256, 512, 1024, 2048]  # each once
    ran = {i: [c.s_q for c, _ in e.requests] for i, e in engines.items()}
    assert sorted(ran[0] + ran[1]) == [64, 128, 256, 512, 1024, 2048]
    assert {r["gpu_index"] for r in rows} == {i for i in ran if ran[i]}  # the row says where it ran
    bad = CliRunner().invoke(main, [*sweep[:-1], "3"])
    assert bad.exit_code == 2 and "--gpus: GPU 3 is not one of the 2 visible" in bad.output


def test_merge_joins_many_hosts_checks_and_flags_a_straggler_across_them(monkeypatch, tmp_path):
    from tui.cli import common as cli

    def host_check(host: str, factor: float, *args) -> str:
        env = dataclasses.replace(RECORDED.environment, host=host, gpu_index=0, gpu_uuid=f"GPU-{host}")
        engine = FakeEngine(relabelled(dataclasses.replace(slower(RECORDED, factor), environment=env)), env)
        monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(engine))
        out = check("--json", *args)
        path = tmp_path / f"{host}.json"
        path.write_text(out.output)
        return str(path)

    files = [host_check("node1", 1.0), host_check("node2", 1.0), host_check("node3", 1.12)]
    assert (
        json.loads((tmp_path / "node3.json").read_text())["gpu"]["host"] == "node3"
    )  # a plain check names its GPU
    merged = tmp_path / "all.json"
    out = CliRunner().invoke(main, ["merge", *files, "--out", str(merged)])
    assert out.exit_code == 1, out.output
    assert "STRAGGLER node3 GPU 0" in out.output and "12.0% slower" in out.output
    data = json.loads(merged.read_text())
    assert [g["where"] for g in data["gpus"]] == ["node1 GPU 0", "node2 GPU 0", "node3 GPU 0"]
    calm = CliRunner().invoke(main, ["merge", *files[:2]])
    assert calm.exit_code == 0 and "STRAGGLER" not in calm.output
    sweep_rows = tmp_path / "s.jsonl"
    sweep_rows.write_text("")
    mixed = CliRunner().invoke(main, ["merge", files[0], str(sweep_rows)])
    assert mixed.exit_code == 2 and "not both" in mixed.output
