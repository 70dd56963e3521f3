"""What the CLI makes of bad input and of a machine without a GPU: exit 2 naming the option for
bad input (user text shown as typed, never read as markup; one line per problem), and a `check`
that still asks cuDNN's validate() about every case when no GPU is usable."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.fakes import NO_GPU, FakeEngine, computed
from tui.cli import common as cli
from tui.cli.check import check_cases
from tui.cli.main import main
from tui.engine.runner import Engine
from tui.process.session import EngineSession


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def cpu_engine(monkeypatch):
    """The commands' engine session answered in this process by an engine that has no GPU."""
    fake = FakeEngine(computed(Engine(environment=NO_GPU)), environment=NO_GPU)
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    yield fake
    fake.close()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run", "--preset", "[/x]"), "no preset named '[/x]'"),
        (("run", "--preset", "[bold]x"), "no preset named '[bold]x'"),
        (("run", "--heuristics", "[/x]"), "--heuristics: unknown heuristic mode '[/X]'"),
        (("run", "--seq-lens-q", "[/x]"), "(got '[/x]')"),
        (("run", "--preset", ""), "--preset: empty"),
        (("run", "--save-csv", ""), "--save-csv: empty"),
        (("check", "--preset", "nosuch"), "--preset: no preset named 'nosuch'"),
    ],
)
def test_bad_input_exits_2_names_the_option_and_shows_the_text_as_typed(args, needle):
    out = invoke(*args)
    assert out.exit_code == 2, out.output
    assert needle in out.output
    assert "Traceback" not in out.output and "MarkupError" not in out.output
    assert len([line for line in out.output.splitlines() if line.strip()]) == 1  # one line, unwrapped


def test_nothing_runs_before_the_input_is_known_good(cpu_engine):
    assert invoke("run", "--b", "2", "--save-json", "").exit_code == 2
    assert cpu_engine.requests == []


def test_check_without_a_gpu_still_asks_cudnn_about_every_case_and_fails(cpu_engine):
    out = invoke("check")
    assert out.exit_code == 1
    lines = [line for line in out.output.splitlines() if line.startswith(("VALID", "FAIL"))]
    assert len(lines) == len(check_cases(())) + 1 and lines[0].startswith("VALID smoke")
    assert lines[-1].startswith(
        "FAIL no usable GPU: CPU mode requested by the test; cuDNN's validate() accepted"
    )
    assert all(request[1].check is False for request in cpu_engine.requests)  # validation only: fast
    data = json.loads(invoke("check", "--json", "--preset", "gpt2-seed").output)
    assert data["gpu_available"] is False and data["reason"] == NO_GPU.unavailable_reason
    assert [c["status"] for c in data["cases"]] == ["cpu_only"]


@pytest.mark.parametrize("seed", ["-1", str(2**63), str(2**70)])
def test_the_inputs_seed_is_bounded_like_an_int64(seed):
    out = invoke("run", "--seed", seed)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert out.output == f"Error: --seed: seed must be a whole number from 0 to {2**63 - 1} (got {seed})\n"


@pytest.mark.parametrize("command", ["run", "check", "sweep"])
@pytest.mark.parametrize("replays", ["0", "-3", "10001", str(2**64)])
def test_every_integer_option_is_bounded_said_on_one_line_naming_it(cpu_engine, command, replays):
    """`--replays 18446744073709551616` was accepted without a word."""
    out = invoke(command, "--replays", replays, *(("--vary", "b=1,2") if command == "sweep" else ()))
    assert out.exit_code == 2 and cpu_engine.requests == []
    assert out.output == f"Error: --replays: replays must be a whole number from 1 to 10000 (got {replays})\n"


def test_the_bounds_hold_for_a_run_that_bypasses_the_cli_too():
    from tui.model.options import RunOptions

    too_many = RunOptions().with_timing(replays=2**64)
    assert [(e.field, e.message) for e in too_many.problems()] == [
        ("replays", f"replays must be a whole number from 1 to 10000 (got {2**64})")
    ]
    assert RunOptions().with_timing(replays=10_000).problems() == []


@pytest.mark.parametrize("peers", ["all,flash", "flash, ALL", "all,all"])
def test_all_peers_stands_alone(cpu_engine, peers):
    """`--peers all,flash` said "unknown peer all"."""
    out = invoke("run", "--peers", peers)
    assert out.exit_code == 2 and cpu_engine.requests == []
    (line,) = out.output.splitlines()
    assert (
        line.startswith("Error: --peers: all stands alone (every peer), not in a list")
        and repr(peers) in line
    )
    assert "unknown peer" not in line
