"""`sdpa-explorer hunt` through the scripted engine (tests/fakes.py behind the command's own
session, tests/hunt_fakes.py's planted classes): the table of findings with their counts, each
finding's bundle, a crash shrunk in fresh engine processes, bad options on one line, nothing
found."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from fakes import FakeEngine
from hunt_fakes import answering, fp8_crashes, gqa_wrong_backward_nan, planted_result

from tui.cli import common as cli
from tui.cli.main import main
from tui.model.config import SdpaConfig
from tui.process.session import EngineSession

BUNDLE = {"repro.py", "config.json", "result.json", "environment.json", "report.md", "finding.json"}


def hunt(engine, monkeypatch, *args):
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(engine))
    return CliRunner().invoke(main, ["hunt", *map(str, args)])


@pytest.fixture
def fake():
    engine = FakeEngine()
    yield engine
    engine.close()


def test_the_planted_classes_are_found_once_each_counted_and_bundled(fake, monkeypatch, tmp_path):
    fake.answer = answering(gqa_wrong_backward_nan)
    r = hunt(fake, monkeypatch, "--budget", "10m", "--seed", 5, "--focus", "gqa", "--max-configs", 8,
             "--out", tmp_path)  # fmt: skip
    assert r.exit_code == 1, r.output
    assert re.search(r"hunt seed 5: 8 configurations in \d+ s .*; 2 finding\(s\)", r.output)
    table = [line for line in r.output.splitlines() if "│ cuDNN │" in line]
    assert len(table) == 2 and any("h_q 2" in line for line in table)
    assert any("backward true" in line for line in table)
    assert max(len(line) for line in r.output.splitlines() if "│" in line) <= 80  # the table fits 80 columns
    bundles = sorted(p for p in tmp_path.iterdir())
    assert len(bundles) == 2 and all({f.name for f in b.iterdir()} == BUNDLE for b in bundles)
    mismatch = next(b for b in bundles if "mismatch" in b.name)
    config = json.loads((mismatch / "config.json").read_text())
    assert (config["b"], config["h_q"], config["h_kv"], config["s_q"]) == (1, 2, 1, 1)
    report = (mismatch / "report.md").read_text()
    for words in (
        "## Expected",
        "## Got",
        "## Boundary",
        "h_q 1: passes (twice)",
        "## Versions",
        "Whose: **cuDNN**",
    ):
        assert words in report, words
    assert "h2/1" in (mismatch / "repro.py").read_text().split("\n", 3)[1]  # the docstring names it
    assert json.loads((mismatch / "result.json").read_text())["status"] == "mismatch"
    finding = json.loads((mismatch / "finding.json").read_text())
    assert finding["signature"] == {"h_q": "2"} and finding["confirmed"] and finding["whose"] == "cuDNN"
    drawn = [o for _c, o in fake.requests if not o.peers]
    assert all(o.cross_check and o.no_history and not o.autotune for _c, o in fake.requests) and drawn


def test_a_crash_is_shrunk_in_a_fresh_engine_process_each_run(fake, monkeypatch, tmp_path):
    fake.answer = answering(fp8_crashes)
    r = hunt(fake, monkeypatch, "--focus", "fp8", "--max-configs", 2, "--seed", 3, "--out", tmp_path)
    assert r.exit_code == 1, r.output
    assert "crash" in r.output and "dtype fp8_e4m3" in r.output
    asked = fake.requests[1:]  # after the first draw: shrinking, then the second draw
    shrinking = [o for c, o in asked if o.retire_after]
    assert len(shrinking) >= 5 and fake.restarts >= 2
    draws = [o for c, o in fake.requests if not o.retire_after]
    assert len(draws) == 2  # each draw in the process the crash left fresh; the shrink's each asked fresh


def test_nothing_found_exits_0_and_writes_nothing(fake, monkeypatch, tmp_path):
    fake.answer = answering(lambda c, o: planted_result(c, o))
    r = hunt(fake, monkeypatch, "--max-configs", 3, "--out", tmp_path / "none")
    assert r.exit_code == 0, r.output
    assert "3 configurations" in r.output and "0 finding(s)" in r.output and not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    "args,words",
    [
        (["--budget", "soon"], "a budget is a positive duration"),
        (["--focus", "paged,nope"], "unknown focus nope: the focuses are paged, thd"),
        (["--seed", "-1"], "--seed"),
        (["--max-configs", "0"], "--max-configs"),
    ],
)
def test_bad_options_are_said_on_one_line(fake, monkeypatch, args, words):
    r = hunt(fake, monkeypatch, *args)
    assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output
    assert not fake.requests


def test_an_out_that_is_a_file_is_refused(fake, monkeypatch, tmp_path):
    (tmp_path / "f").write_text("")
    r = hunt(fake, monkeypatch, "--out", tmp_path / "f")
    assert r.exit_code == 2 and "--out" in r.output and not fake.requests


def test_the_same_seed_draws_the_same_configurations(fake, monkeypatch, tmp_path):
    fake.answer = answering(lambda c, o: planted_result(c, o))
    hunt(fake, monkeypatch, "--max-configs", 4, "--seed", 9)
    first = [c for c, _o in fake.requests]
    fake.requests.clear()
    hunt(fake, monkeypatch, "--max-configs", 4, "--seed", 9)
    assert [c for c, _o in fake.requests] == first and all(isinstance(c, SdpaConfig) for c in first)


def test_a_run_that_asks_to_retire_leaves_the_next_run_to_a_fresh_engine_process():
    """What a crash's candidates ask for (RunOptions.retire_after), in the real engine process."""
    from fakes import NO_GPU

    from tui.model.options import RunOptions
    from tui.process.client import EngineClient

    small = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64)
    with EngineSession(EngineClient(environment_override=NO_GPU, log_file=None)) as session:
        session.ready()
        first = session.client.pid
        assert session.run(small, RunOptions(check=False, retire_after=True)).status == "cpu_only"
        assert session.run(small, RunOptions(check=False)).status == "cpu_only"
        second = session.client.pid
        assert second != first and session.restarts == 0  # a fresh process, quietly
        session.run(small, RunOptions(check=False))
        assert session.client.pid == second  # one that did not ask stays


def test_record_keeps_cudnns_findings_as_known_issues_that_match_their_class(fake, monkeypatch, tmp_path):
    from tui.model.known_issues import WRONG_RESULT
    from tui.store import known_issues

    monkeypatch.setenv("SDPA_EXPLORER_KNOWN_ISSUES", str(tmp_path / "known.json"))
    fake.answer = answering(gqa_wrong_backward_nan)
    for _ in range(2):  # the same findings twice: kept once each
        r = hunt(
            fake,
            monkeypatch,
            "--seed",
            5,
            "--focus",
            "gqa",
            "--max-configs",
            4,
            "--record",
            "--out",
            tmp_path / "b",
        )
        assert r.exit_code == 1 and "recorded finding 1 as the known issue hunt-" in r.output, r.output
    issues, problems = known_issues.load(tmp_path / "known.json")
    assert not problems and len(issues) == len({i.key for i in issues}) >= 1
    gqa = next(i for i in issues if "h_q 2" in i.summary)
    assert gqa.outcome == WRONG_RESULT and gqa.archs == (9,) and gqa.seen == ("9.19.0",)
    assert gqa.applies(SdpaConfig(h_q=8, h_kv=2)) and not gqa.applies(SdpaConfig(h_q=1, h_kv=1))


def test_ctrl_c_stops_the_hunt_and_keeps_what_it_found(fake, monkeypatch, tmp_path):
    """A Ctrl+C during a shrinking run: no more runs, the finding so far in the table."""
    asked = []

    class Interrupted(EngineSession):
        def run(self, config, options, watch=None):
            asked.append(config)
            if len(asked) == 4:
                raise KeyboardInterrupt
            return super().run(config, options, watch)

    fake.answer = answering(gqa_wrong_backward_nan)
    monkeypatch.setattr(cli, "engine_session", lambda: Interrupted(fake))
    r = CliRunner().invoke(main, ["hunt", "--focus", "gqa", "--seed", "5", "--out", str(tmp_path)])
    assert r.exit_code == 1, r.output
    assert "stopped when asked" in r.output and "1 finding(s)" in r.output and len(asked) == 4
    assert (next(tmp_path.iterdir()) / "report.md").read_text().count("stopped when asked") == 1
