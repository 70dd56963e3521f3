"""`sdpa-explorer search` on a recorded search (the engine session replaced by one that answers it):
the report names the pick, the best, the gain and how to pin it; JSON and CSV carry every
candidate; --save-preset keeps a preset pinned to the best; several presets give one row each.
And the exported script of a pinned configuration rebuilds that plan."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
from click.testing import CliRunner
from test_knob_search import recorded, runner_up_faster_fresh

from tui.cli.main import main
from tui.model.config import SdpaConfig
from tui.model.search_results import FreshRun
from tui.present.repro import script
from tui.store.presets import find


class AnsweringSession:
    """The engine session a command opens, answering each search with the recorded one."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def search(self, config, options, watch=None):
        self.asked.append((config, options))
        if watch is not None:
            watch("searching: candidate 1, 1 KERNEL_CFG=0, 0 of 60 s")
        return dataclasses.replace(self.answer, config=config)


@pytest.fixture
def session(monkeypatch):
    s = AnsweringSession(recorded())
    monkeypatch.setattr("tui.cli.common.engine_session", lambda: s)  # tui.cli.main loads the module
    return s


def invoke(*args):
    return CliRunner().invoke(main, ["search", *args])


@pytest.mark.parametrize(
    ("text", "seconds"), [("60s", 60), ("2m", 120), ("90", 90), ("1.5min", 90), ("1h", 3600)]
)
def test_a_budget_reads_as_seconds(text, seconds):
    from tui.cli.search import parse_budget

    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5s", "fast", "10 days"])
def test_a_bad_budget_names_the_option(text):
    r = invoke("--budget", text)
    assert r.exit_code == 2 and "--budget" in r.output and "positive duration" in r.output


def test_one_search_reports_the_pick_the_best_and_how_to_pin_it(session):
    r = invoke("--preset", "llama3-8b-decode", "--budget", "30s", "--peers", "flash")
    assert r.exit_code == 0, r.output
    config, options = session.asked[0]
    assert (
        config == find("llama3-8b-decode").config and options.budget_s == 30 and options.peers == ("flash",)
    )
    assert "engine 1: KERNEL_CFG 0..63 (64 settings, tried whole" in r.output
    assert "candidates: 3 tried, 2 built, 1 failed to build, 1 failed the check" in r.output
    assert "+11.3% against the pick" in r.output
    assert 'pin it: --plan "1 KERNEL_CFG=27"' in r.output
    assert "finding: 1 KERNEL_CFG=30 runs in 120.00 µs but fails the check" in r.output


def test_json_and_csv_carry_every_candidate(session, tmp_path):
    out = tmp_path / "found.csv"
    r = invoke("--json", "--save-csv", str(out))
    assert r.exit_code == 0, r.output
    data, _end = json.JSONDecoder().raw_decode(r.output[r.output.index("{") :])  # "wrote ..." follows
    assert data["pick_plan"] == "1 KERNEL_CFG=3" and len(data["trials"]) == 5
    rows = list(csv.DictReader(out.open()))
    assert [row["plan"] for row in rows][2] == "1 KERNEL_CFG=27" and rows[4]["status"] == "build failed"


def test_save_preset_keeps_the_best_pinned(session):
    r = invoke("--preset", "llama3-8b-decode", "--save-preset", "decode-pinned")
    assert r.exit_code == 0, r.output
    preset = find("decode-pinned")
    assert preset.config == find("llama3-8b-decode").config.replace(plan="1 KERNEL_CFG=27")
    assert "pinned to 1 KERNEL_CFG=27 by a knob search" in preset.description


def test_where_a_fresh_process_ran_the_runner_up_faster_that_is_the_pin(monkeypatch):
    s = AnsweringSession(runner_up_faster_fresh())
    monkeypatch.setattr("tui.cli.common.engine_session", lambda: s)
    r = invoke("--preset", "llama3-8b-decode")
    assert r.exit_code == 0, r.output
    assert "the pick itself" in r.output and 'pin it: --plan "1 KERNEL_CFG=27"' in r.output
    r = invoke("--preset", "llama3-8b-decode", "--save-preset", "decode-fresh")
    assert r.exit_code == 0, r.output
    preset = find("decode-fresh")
    assert preset.config.plan == "1 KERNEL_CFG=27"
    assert "155.00 µs, 5.2% faster than the heuristic's pick in a fresh process" in preset.description


def test_where_the_fresh_process_ran_the_best_slower_than_the_pick_the_pick_is_kept(monkeypatch):
    slower = dataclasses.replace(recorded(), fresh=FreshRun("1 KERNEL_CFG=27", 155.0, 163.5))
    s = AnsweringSession(slower)
    monkeypatch.setattr("tui.cli.common.engine_session", lambda: s)
    r = invoke("--preset", "llama3-8b-decode", "--save-preset", "decode-kept")
    assert r.exit_code == 0, r.output
    assert "pin it:" not in r.output and find("decode-kept").config.plan == "1 KERNEL_CFG=3"


def test_several_presets_are_searched_in_turn_one_row_each(session):
    r = invoke("--preset", "llama3-8b-decode", "--preset", "gpt2-seed", "--budget", "10s")
    assert r.exit_code == 0, r.output
    assert [c.label() for c, _ in session.asked] == [
        find(n).config.label() for n in ("llama3-8b-decode", "gpt2-seed")
    ]
    assert "Knob search per preset" in r.output and "11.3%" in r.output


def test_save_preset_takes_one_search_only(session):
    r = invoke("--preset", "gpt2-seed", "--preset", "bert-base", "--save-preset", "x")
    assert r.exit_code == 2 and "--save-preset keeps the best of one search" in r.output


def test_a_search_that_could_not_run_says_why_and_exits_1(monkeypatch):
    answer = dataclasses.replace(
        recorded(), status="cpu_only", message="a knob search builds and times plans on a GPU"
    )
    monkeypatch.setattr("tui.cli.common.engine_session", lambda: AnsweringSession(answer))
    r = invoke()
    assert r.exit_code == 1 and "CPU_ONLY a knob search builds and times plans on a GPU" in r.output


def test_the_script_of_a_pinned_configuration_rebuilds_that_plan():
    pinned = script(SdpaConfig(s_q=1, s_kv=4096, plan="1 KERNEL_CFG=27"))
    compile(pinned, "repro.py", "exec")
    assert "graph.create_execution_plan(1, {cudnn.knob_type.KERNEL_CFG: 27})" in pinned
    assert "graph.build_plan_at_index(graph.get_execution_plan_count() - 1)" in pinned
    assert "create_execution_plan(" not in script(SdpaConfig()).replace("create_execution_plans(", "")


def test_the_per_preset_table_gives_the_gains_span_over_the_places_of_the_inputs():
    from rich.console import Console
    from test_knob_search import placed

    from tui.cli.search import presets_table

    console = Console(width=250, record=True)
    console.print(presets_table([placed(), recorded()]))
    out = console.export_text()
    assert "3.8% (2.1-7.4)" in out and "11.3% " in out  # confirmed at one place: the gain alone


@pytest.mark.parametrize("option", ["--save-json", "--save-csv"])
def test_an_export_the_disk_cuts_short_is_said_in_one_line_and_leaves_no_cut_file(
    session, tmp_path, monkeypatch, option
):
    from full_disk import full_after

    path = tmp_path / "found.out"
    path.write_text("an earlier search's")
    full_after(monkeypatch, 100)
    r = invoke(option, str(path))
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)
    assert [line for line in r.output.splitlines() if option in line] == [
        f"Error: {option}: cannot write {path}: No space left on device"
    ]
    assert path.read_text() == "an earlier search's" and [p.name for p in tmp_path.iterdir()] == ["found.out"]


UNDER_A_FILE_SIZE_LIMIT = """
import resource, sys
from click.testing import CliRunner
from test_search_cli import AnsweringSession, recorded
from tui.cli import common
from tui.cli.main import main
common.engine_session = lambda: AnsweringSession(recorded())
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))  # as `ulimit -f 1`
r = CliRunner().invoke(main, ["search", "--save-json", sys.argv[1], "--save-csv", sys.argv[2]])
print(r.exit_code)
print(r.output)
"""


def test_under_a_file_size_limit_no_export_is_cut(tmp_path):
    """`ulimit -f 1` once left 1,024 bytes of a 3,017-byte JSON: now the file is whole or absent."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    found, rows = tmp_path / "found.json", tmp_path / "found.csv"
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    done = subprocess.run([sys.executable, "-c", UNDER_A_FILE_SIZE_LIMIT, str(found), str(rows)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, *said = done.stdout.splitlines()
    assert code == "1" and "Traceback" not in done.stdout
    assert f"Error: --save-json: cannot write {found}: File too large" in said
    assert f"wrote {rows}" in said  # the CSV is smaller than the limit
    assert not found.exists() and rows.read_text().startswith("preset,plan,")


def test_the_command_runs_the_dashboards_search_job_and_goes_on_after_a_crash(monkeypatch):
    """No stand-in session: `search` drives the search job (process/session.py) against the fake
    engine as the Search pane does; a candidate that kills the engine costs that process, the job
    asks a fresh one to go on from it, and the report names the crash and the best."""
    from fakes import FakeEngine, searched

    from tui.process.session import EngineSession

    fake = FakeEngine(searcher=searched(crash_at="1 KERNEL_CFG=12"))
    monkeypatch.setattr("tui.cli.common.engine_session", lambda: EngineSession(fake))
    r = invoke("--preset", "llama3-8b-decode", "--budget", "30s")
    assert r.exit_code == 0, r.output
    assert fake.restarts == 1 and len(fake.searches) == 2
    config, again = fake.searches[-1]
    assert config == find("llama3-8b-decode").config and again.budget_s == 30
    assert again.crashes[0].startswith("1 KERNEL_CFG=12: the engine process died (SIGSEGV")
    assert [t.plan for t in again.resume][-1] == "1 KERNEL_CFG=12"
    assert "1 KERNEL_CFG=12: the engine process died (SIGSEGV" in r.output
    assert 'pin it: --plan "1 KERNEL_CFG=27"' in r.output
