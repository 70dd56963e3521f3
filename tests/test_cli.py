"""The command line: its options, exit codes and words. `run` and `check` talk to the engine
through its process: one test here starts the real one; the others are answered, through the same
session, by the engine's own code run in this process (a child's start-up, torch imported again,
would be most of their time; tests/test_recovery.py covers the process itself)."""

import json

import pytest
from click.testing import CliRunner

from tui.cli import common as cli
from tui.cli.main import main
from tui.engine.environment import collect

NO_GPU = not collect().gpu_available


def invoke(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def machine_engine():
    """The engine as the engine process makes it: told what this machine has."""
    from tui.engine.runner import Engine

    return Engine(environment=collect())


@pytest.fixture
def engine_in_process(machine_engine, monkeypatch):
    """The commands' engine session, answered by `machine_engine` in this process (the fake client
    keeps the process's contract: events on a thread of their own, ready first)."""
    from fakes import FakeEngine, computed

    from tui.process.session import EngineSession

    fake = FakeEngine(computed(machine_engine), environment=machine_engine.environment())
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    yield fake
    fake.close()


def test_help_lists_the_commands():
    r = invoke("--help")
    assert r.exit_code == 0
    assert "dashboard" in r.output
    for cmd in ("run", "check", "env"):
        assert cmd in r.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--b", "x"], "--b"),
        (["--b", "0"], "--b: batch (b) must be at least 1 (got 0)"),
        (["--h-q", "6", "--h-kv", "4"], "--h-kv: h_q must be a multiple of h_kv (got 6 and 4)"),
        (["--dtype", "fp64"], "--dtype"),
        (["--heuristics", "A,Z"], "--heuristics: unknown heuristic mode 'Z'"),
        (["--replays", "0"], "--replays"),
        (["--scale", "-1"], "--scale: attention scale must be a positive number"),
    ],
)
def test_bad_input_exits_2_and_names_the_option(args, needle):
    r = invoke("run", *args)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert "Traceback" not in r.output


@pytest.mark.skipif(not NO_GPU, reason="checks the answer of a machine without a GPU")
def test_run_json_without_gpu_uses_the_shorthands():
    """Through the real engine process."""
    r = invoke("run", "--b", "1", "--h", "4", "--s", "128", "--d", "64", "--causal", "none", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["status"] == "cpu_only"
    c = data["config"]
    assert (c["h_q"], c["h_kv"], c["s_q"], c["s_kv"], c["d_qk"], c["d_v"]) == (4, 4, 128, 128, 64, 64)
    (forward,) = data["passes"]
    assert forward["checks"][0]["peers"]["torch FLASH fp16"]["mismatched"] == 0


@pytest.mark.skipif(not NO_GPU, reason="checks the answer of a machine without a GPU")
def test_run_report_without_gpu(engine_in_process):
    r = invoke("run", "--b", "1", "--h", "2", "--s", "64")
    assert r.exit_code == 0, r.output
    assert "CPU ONLY" in r.output and "validate" in r.output and "GPU figures unavailable" in r.output


@pytest.mark.skipif(not NO_GPU, reason="checks the answer of a machine without a GPU")
def test_check_fails_without_gpu_and_says_why(engine_in_process):
    r = invoke("check")
    assert r.exit_code == 1
    assert "no usable GPU" in r.output
    r = invoke("check", "--json")
    assert r.exit_code == 1 and json.loads(r.output)["gpu_available"] is False


def test_unsupported_config_exits_1_with_cudnns_message(engine_in_process):
    r = invoke("run", "--d", "65", "--no-autotune")
    assert r.exit_code == 1
    assert "hidden_dim should be multiple of 8" in r.output


def test_env_json():
    r = invoke("env", "--json")
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["frontend_version"] and data["torch_version"]
    assert ("unavailable_reason" in data) and (data["gpu_available"] or data["unavailable_reason"])


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_env_says_in_one_line_when_the_engine_process_cannot_start(monkeypatch, as_json):
    from tui.process import launcher

    def no_launch(*_args, **_kwargs):
        raise RuntimeError("the engine process could not be started: no processes left")

    monkeypatch.setattr(launcher, "launch", no_launch)
    r = CliRunner().invoke(main, ["env", "--json"] if as_json else ["env"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        "Error: the engine process cannot start: the engine process could not be started: no processes left"
    ]
