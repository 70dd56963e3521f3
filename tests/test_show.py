"""`sdpa-explorer show FILE.json`: a result saved on a GPU box (any schema this version reads)
rendered as the `run` report on a machine without one."""

import json
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
