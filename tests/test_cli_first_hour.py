"""What a new user meets in their first hour of the command line: `--no-history` on every command
that measures, one form for every error line, an export path that cannot take a file, a file that
is not a saved result, and a shorthand's error naming the shorthand. The engine, where a command
needs one, is the scripted fake (tests/fakes.py) behind the commands' own session."""

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import FakeEngine

from tui.cli import common as cli
from tui.cli.main import main
from tui.process.session import EngineSession
from tui.store.history import History
from tui.store.places import DATA_DIR_ENV

SMALL = ["--b", "1", "--h", "2", "--no-autotune", "--replays", "1"]


def invoke(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "400"}, **kw)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A scripted engine, and a history of this test's own."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    engine = FakeEngine()
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(engine))
    yield engine
    engine.close()


def kept() -> list:
    with History() as history:
        return history.runs()


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.lower().startswith("error:")]


# ---- 1. sweep takes --no-history, as run and check do ----------------------------------------
def test_sweep_keeps_its_points_in_the_history_unless_no_history(fake):
    r = invoke("sweep", *SMALL, "--vary", "s=64,128", "--no-history")
    assert r.exit_code == 0, r.output
    assert kept() == [] and len(fake.requests) == 2
    r = invoke("sweep", *SMALL, "--vary", "s=64,128")
    assert r.exit_code == 0, r.output
    rows = kept()
    assert [row.source for row in rows] == ["sweep", "sweep"] and {row.s_q for row in rows} == {64, 128}


def test_the_command_that_resumes_a_sweep_keeps_no_history(fake, tmp_path):
    """--no-history is one of the options the resuming command repeats."""
    from tui.cli.sweep import resume_command, sweep

    args = ["--vary", "b=1,2", "--out", str(tmp_path / "rows.jsonl"), "--no-history"]
    with sweep.make_context("sdpa-explorer sweep", args) as ctx:
        assert resume_command(ctx).endswith(" --no-history --resume")


# ---- 2. one form for every error line ---------------------------------------------------------
def test_a_usage_error_and_a_refusal_start_alike(tmp_path, monkeypatch):
    usage = invoke("run", "--no-such-option")  # click's own
    refusal = invoke("run", "--b", "0")  # the tool's, exit 2
    data = tmp_path / "data"
    data.mkdir()
    (data / "history.sqlite3").write_text("not a database")
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    unreadable = invoke("history")  # the tool's, exit 1
    assert (usage.exit_code, refusal.exit_code, unreadable.exit_code) == (2, 2, 1)
    for r in (usage, refusal, unreadable):
        assert error_lines(r.output), r.output
        assert all(line.startswith("Error: ") for line in error_lines(r.output)), r.output


# ---- 3. an export path that cannot take a file ------------------------------------------------
@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    "path,words",
    [
        ("/proc/version", "not a regular file (a kernel's file: its file system stores nothing)"),
        ("/proc/sdpa-result.json", "the folder /proc takes no new files"),
    ],
    ids=["kernel-file", "kernel-folder"],
)
def test_an_export_to_a_kernel_file_is_refused_before_the_run_in_one_line(fake, path, words):
    r = invoke("run", *SMALL, "--save-json", path)
    assert r.exit_code == 2 and fake.requests == [], r.output
    assert r.output.splitlines() == [f"Error: --save-json: cannot write {path}: {words}"], r.output


def test_an_export_to_a_folder_that_is_not_writable_is_refused_before_the_run(fake, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes any folder")
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    r = invoke("run", *SMALL, "--save-csv", folder / "plans.csv")
    assert r.exit_code == 2 and fake.requests == [], r.output
    assert r.output.splitlines() == [
        f"Error: --save-csv: cannot write {folder / 'plans.csv'}: the folder {folder} is not writable"
    ]


# ---- 4. a file that is not a saved result -----------------------------------------------------
@pytest.mark.parametrize(
    "name,content",
    [
        ("s.csv", b"config,dtype\nb1,fp16\n"),
        ("picture.png", b"\x89PNG\r\n\x1a\n\xff\xfe"),
        ("empty.json", b""),
    ],
    ids=["csv", "binary", "empty"],
)
def test_show_of_a_file_that_is_not_json_says_what_show_reads(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    r = invoke("show", path)
    assert r.exit_code == 2, r.output
    assert r.output.splitlines() == [
        f"Error: show: {path} is not a saved result (not JSON); show reads the JSON that --save-json "
        "writes, or a run's id in the history (`sdpa-explorer history` lists them)"
    ], r.output


# ---- 5. a shorthand's error names the shorthand -----------------------------------------------
@pytest.mark.parametrize("command", ["run", "explain"])
def test_the_error_of_a_shorthand_names_it(command):
    r = invoke(command, "--s", "99999999999")
    assert r.exit_code == 2, r.output
    lines = r.output.splitlines()
    assert lines == [
        "Error: --s: query length (s_q) must be at most 4194304 (got 99999999999)",
        "Error: --s: key/value length (s_kv) must be at most 4194304 (got 99999999999)",
    ], r.output


def test_a_field_given_beside_its_shorthand_is_named_as_given():
    r = invoke("run", "--h", "0", "--h-kv", "0")
    assert r.exit_code == 2, r.output
    assert [line.split(":")[1].strip() for line in error_lines(r.output)] == ["--h", "--h-kv"], r.output


def test_no_command_writes_an_error_line_in_another_form():
    """Every error line goes through cli/common.py's prefix, or spells it as it does."""
    import re

    import tui

    other = [
        f"{path.name}:{n}"
        for path in Path(tui.__file__).parent.rglob("*.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\[red\]error:|[\"']error: ", line, re.IGNORECASE) and "Error:" not in line
    ]
    assert other == []


def test_a_saved_result_cut_short_still_says_where_it_breaks(tmp_path):
    """A JSON file damaged midway is a saved result gone wrong: the parser's place is the clue."""
    path = tmp_path / "result.json"
    path.write_text('{"schema_version": "2.5", "config": {')
    r = invoke("show", path)
    assert r.exit_code == 2, r.output
    assert (
        r.output.startswith(f"Error: show: {path} is not a saved result: not JSON: ") and "line 1" in r.output
    )
