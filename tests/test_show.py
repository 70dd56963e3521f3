"""`sdpa-explorer show FILE.json`: a result saved on a GPU box (any schema this version reads)
rendered as the `run` report on a machine without one."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import TRAINING
from measured import measured

from tui.cli.main import main
from tui.model.statuses import SCHEMA_VERSION
from tui.present.format import timing_text

DATA = Path(__file__).parent / "data"


def show(*args):
    return CliRunner().invoke(main, ["show", *args], env={"COLUMNS": "400"})  # paths unwrapped


def words_of(output: str) -> str:
    """The output with the terminal's line wrapping undone."""
    return " ".join(output.split())


@pytest.mark.parametrize(
    "name,words",
    [
        ("seed_h200.json", ["forward kernel time 26.78 µs", "Forward plans", "Forward build phases"]),
        (
            "train_h200.json",
            ["backward kernel time 2.855 ms", "Backward outputs against fp32 autograd", "dV"],
        ),
        ("fp8_h200.json", ["forward FP8 amax: amax_o 3.286", "FP8 recipe"]),
    ],
)
def test_show_renders_a_recorded_result_as_the_report(name, words):
    r = show(str(DATA / name))
    assert r.exit_code == 0, r.output
    for w in words:
        assert w in words_of(r.output), w


def test_show_json_gives_the_result_in_this_versions_schema(tmp_path):
    r = show(str(DATA / "train_h200.json"), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["schema_version"] == SCHEMA_VERSION and [p["kind"] for p in data["passes"]] == [
        "forward",
        "backward",
    ]
    again = tmp_path / "again.json"
    again.write_text(r.output)
    assert show(str(again), "--json").output == r.output  # a file of this schema reads back the same


def test_show_of_a_21_result_says_each_figures_regime_and_the_gpu_around_it(tmp_path):
    """A training step measured under sustained load (the backward unstable), shown on a laptop."""
    result = measured(TRAINING, unstable=("backward",))
    path = tmp_path / "train.json"
    path.write_text(result.to_json())
    r = show(str(path))
    assert r.exit_code == 0, r.output
    text = words_of(r.output)
    fwd, bwd = (p.timing for p in result.passes)
    assert f"forward kernel time {timing_text(fwd)} ({fwd.regime_words}) via" in text
    assert f"backward kernel time {timing_text(bwd)} ({bwd.regime_words}) via" in text
    assert "backward samples 20, retried" in text and "UNSTABLE" in text
    assert text.count("GPU SM clock 1980 → 1755 MHz") == 2 and "(sustained, unstable)" in text


@pytest.mark.parametrize(
    "content,words",
    [
        (None, "cannot read"),
        ("{not json", "is not a saved result"),
        ('{"schema_version": "9.0", "config": {}}', "schema 9.0 is not readable"),
        ('{"schema_version": "2.0", "config": {"b": "four"}, "status": "ok"}', "is not a saved result"),
    ],
    ids=["missing", "not-json", "newer-schema", "bad-config"],
)
def test_show_of_a_bad_file_exits_2_naming_it(tmp_path, content, words):
    path = tmp_path / "result.json"
    if content is not None:
        path.write_text(content)
    r = show(str(path))
    assert r.exit_code == 2, r.output
    text = words_of(r.output)
    assert words in text and "result.json" in text and "Traceback" not in text


# ---- what a user may name instead of a saved result ------------------------------------------
def one_line_naming(r, *words: str) -> None:
    """Bad input: exit 2, one line (unwrapped) naming it, never a traceback."""
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    for w in words:
        assert w in r.output, (w, r.output)


@pytest.mark.parametrize(
    "args",
    [["show", "{}"], ["compare", "{}", "{}"], ["--open", "{}"], ["show", "--json", "{}"]],
    ids=["show", "compare", "open", "show-json"],
)
def test_a_fifo_or_a_device_is_refused_unread(tmp_path, args):
    from fifos import invoke_given_fifo

    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    r, blocked = invoke_given_fifo(main, [a.format(fifo) for a in args], fifo, env={"COLUMNS": "400"})
    assert not blocked, "the command waited on the FIFO"
    option = {"show": "show", "compare": "compare A", "--open": "--open"}[args[0]]
    one_line_naming(r, f"{option}: cannot read {fifo}: not a regular file (a FIFO)")
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")  # reading it would never end
    r = CliRunner().invoke(main, [a.format(zero) for a in args], env={"COLUMNS": "400"})
    one_line_naming(r, f"{option}: cannot read {zero}: not a regular file (a character device)")


@pytest.mark.parametrize(
    "name",
    ["²", "١٢", "99999999999999999999", "9" * 5000, " 7", "1e3"],
    ids=["super", "arabic", "big", "5000", "spaced", "exp"],
)
def test_what_is_not_a_runs_id_is_a_path_and_said_so_in_one_line(tmp_path, monkeypatch, name):
    """An id is ASCII digits within SQLite's integer range; anything else names a file."""
    monkeypatch.chdir(tmp_path)
    r = show(name)
    one_line_naming(r, "show: cannot read ")
    assert len(r.output) < 300  # a path of 5000 characters is not repeated whole


def test_an_id_at_sqlites_limit_is_a_runs_id(tmp_path, monkeypatch):
    from tui.cli.common import is_run_id

    assert is_run_id(str(2**63 - 1)) and not is_run_id(str(2**63)) and not is_run_id("²")
    monkeypatch.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path))
    one_line_naming(show(str(2**63 - 1)), "show: ")


@pytest.mark.parametrize(
    "content,words",
    [
        ("[1, 2]", "a saved result is a JSON object, not a list"),
        ("null", "a saved result is a JSON object, not null"),
        ('"x"', "a saved result is a JSON object, not text"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
        ('{"schema_version": 2, "config": {}}', "schema_version must be text"),
        ('{"schema_version": "1.0", "config": [1], "status": "ok"}', "config must be an object, not a list"),
        ('{"schema_version": "2.5", "config": [1], "status": "ok"}', "config must be an object, not a list"),
        ('{"schema_version": "2.5", "config": {}, "status": "ok", "passes": {}}', "passes must be a list"),
        (
            '{"schema_version": "2.5", "config": {}, "status": "ok", "passes": [{"kind": "forward", '
            '"plans": [{"index": 0, "name": "p", "timing": [1]}]}]}',
            "passes[0].plans[0].timing must be an object",
        ),
        ('{"schema_version": "2.5", "config": {}, "status": 1}', "status must be text, not a number"),
    ],
    ids=["list", "null", "text", "deep", "version", "config-1", "config-2", "passes", "timing", "status"],
)
def test_a_result_of_the_wrong_shape_exits_2_naming_the_field(tmp_path, content, words):
    path = tmp_path / "result.json"
    path.write_text(content)
    one_line_naming(show(str(path)), f"show: {path} is not a saved result: {words}")


def test_markup_in_a_saved_results_words_is_shown_as_written(tmp_path):
    """Plan names, knobs, notes, phases, peers and the environment are the file's words, not markup."""
    import dataclasses

    from fakes import PEERS

    fwd = PEERS.forward
    plans = tuple(dataclasses.replace(p, name=f"[/x]{p.name}", behavior_notes=("[bold]",)) for p in fwd.plans)
    phases = tuple(dataclasses.replace(ph, note="[/]") for ph in fwd.phases)
    peers = tuple(dataclasses.replace(peer, name="[red]peer", description="[/y]") for peer in fwd.field_peers)
    changed = dataclasses.replace(fwd, plans=plans, phases=phases, field_peers=peers, notes=("[/z]",))
    path = tmp_path / "markup.json"
    path.write_text(dataclasses.replace(PEERS, passes=(changed,)).to_json())
    r = show(str(path))
    assert r.exit_code == 0, r.output
    for words in ("[/x]", "[bold]", "[/]", "[red]peer", "[/z]"):
        assert words in r.output, words
