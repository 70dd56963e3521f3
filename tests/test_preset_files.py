"""What a user keeps in the preset folder never crashes or hangs loading it: markup in keys and
descriptions, deep nesting, FIFOs and devices, huge files, thousands of wrong keys, a byte-order
mark, and arbitrary text and bytes (fuzzed). Each is a problem naming the file, or a preset."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.cli.main import main
from tui.store import presets as presetmod

# the same small budget every run (about a second); SDPA_FUZZ=long for the long run outside CI
FUZZ = settings(
    max_examples=10_000 if os.environ.get("SDPA_FUZZ") == "long" else 40,
    derandomize=os.environ.get("SDPA_FUZZ") != "long",
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """The test's own folder as the user's preset folder."""
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path))
    return tmp_path


def problems_of(name: str) -> list[str]:
    _, problems = presetmod.load_all()
    return [str(p) for p in problems if Path(p.path).name == name]


def presets_cli(*args: str):
    return CliRunner().invoke(main, ["presets", *args])


def test_markup_in_a_preset_file_is_shown_as_typed(user_dir):
    (user_dir / "key.toml").write_text('"[/x]" = 1\n[config]\nb = 1\n')
    (user_dir / "desc.toml").write_text('description = "[/x][bold]"\n[config]\nb = 1\n')
    (user_dir / "[red]name.toml").write_text("[config]\nb = 1\n")
    (user_dir / "table.toml").write_text('config = "b = 4"\n')
    result = presets_cli()
    assert result.exit_code == 0, result.output
    assert "[/x][bold]" in result.output and "[red]name" in result.output
    assert "key.toml, line 1, key '[/x]': unknown key" in result.output
    assert "table.toml, line 1, key 'config': must be a table ([config])" in result.output


def test_check_names_a_skipped_preset_as_typed(user_dir, capsys):
    from tui.cli.check import check_cases

    (user_dir / "key.toml").write_text('"[/x]" = 1\n')
    assert ("gpt2-seed", presetmod.find("gpt2-seed").config) in check_cases(())
    assert "preset skipped: key.toml, line 1, key '[/x]': unknown key" in capsys.readouterr().err


def test_presets_save_says_where_as_typed(tmp_path, monkeypatch):
    folder = tmp_path / "[bold]presets"
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
    result = CliRunner().invoke(main, ["presets", "save", "mine", "--b", "1"])
    assert result.exit_code == 0, result.output
    assert str(folder / "mine.toml") in result.output.replace("\n", "")


def test_deep_nesting_is_a_problem_and_every_other_preset_loads(user_dir):
    for key in ("description", "config"):
        (user_dir / f"deep-{key}.toml").write_text(f"{key} = " + "[" * 500 + "]" * 500 + "\n")
    (user_dir / "deep-table.toml").write_text("x = " + "{a = " * 500 + "1" + "}" * 500 + "\n")
    found, problems = presetmod.load_all()
    assert "gpt2-seed" in found
    assert {Path(p.path).name for p in problems} == {
        "deep-description.toml",
        "deep-config.toml",
        "deep-table.toml",
    }
    assert all("nested too deeply" in p.message for p in problems)
    assert presetmod.find("bert-base").config.causal == "none"


def test_fifos_devices_and_huge_files_are_reported_by_name_never_read(user_dir):
    os.mkfifo(user_dir / "fifo.toml")  # reading it would wait for a writer forever
    (user_dir / "zero.toml").symlink_to("/dev/zero")  # reading it would never end
    (user_dir / "folder.toml").mkdir()
    (user_dir / "huge.toml").write_text("# " + "x" * (1 << 20) + "\n[config]\nb = 1\n")
    (user_dir / "linked.toml").symlink_to(user_dir / "real.txt")
    (user_dir / "real.txt").write_text("[config]\nb = 3\n")
    found, problems = presetmod.load_all()
    words = {Path(p.path).name: p.message for p in problems}
    assert words["fifo.toml"].startswith("not a regular file (a FIFO)")
    assert words["zero.toml"].startswith("not a regular file (a character device)")
    assert words["folder.toml"].startswith("not a regular file (a folder)")
    assert words["huge.toml"].startswith("larger than 1 MiB")
    assert found["linked"].config.b == 3  # a link to a regular file is followed
    result = CliRunner().invoke(main, ["run", "--preset", "fifo"])
    assert result.exit_code == 2 and "fifo.toml: not a regular file (a FIFO)" in result.output


def test_thousands_of_problems_are_the_first_few_and_a_count(user_dir):
    (user_dir / "many.toml").write_text("".join(f"k{i} = 1\n" for i in range(10_000)))
    (user_dir / "many-config.toml").write_text("[config]\n" + "".join(f"x{i} = 1\n" for i in range(3000)))
    many = problems_of("many.toml")
    assert len(many) == presetmod.MAX_PROBLEMS + 1
    assert many[0] == "many.toml, line 1, key 'k0': unknown key (known: description, source, config, timing)"
    assert many[-1] == "many.toml: and 9,995 more problems in this file"
    assert problems_of("many-config.toml")[-1] == "many-config.toml: and 2,995 more problems in this file"
    data = json.loads(presets_cli("--json").output)
    assert len(data["problems"]) == 2 * (presetmod.MAX_PROBLEMS + 1)


def test_a_long_key_is_shortened_in_its_problem(user_dir):
    (user_dir / "long.toml").write_text("k" * 100_000 + " = 1\n")
    (problem,) = problems_of("long.toml")
    assert len(problem) < 200 and "…" in problem


def test_a_byte_order_mark_is_accepted(user_dir):
    (user_dir / "bom.toml").write_bytes('\ufeffdescription = "saved by Notepad"\n[config]\nb = 2\n'.encode())
    preset = presetmod.find("bom")
    assert preset.config.b == 2 and preset.description == "saved by Notepad"


def test_undecodable_bytes_say_so(user_dir):
    (user_dir / "latin1.toml").write_bytes(b'description = "caf\xe9"\n')
    assert problems_of("latin1.toml") == ["latin1.toml: not UTF-8 text (at byte 18)"]


TOML_BITS = st.sampled_from(
    ["[config]", "[timing]", "[[config]]", "b = ", "s_q = ", "regime = ", "description = ", "\ufeff", "\n",
     "[", "]", "{", "}", '"[/x]"', "'", '"""', "=", ",", ".", "#", "1", "-5", "2e400", "nan", "inf",
     "true", "1979-05-27T07:32:00Z", "0x7fffffffffffffffff", '"bf16"', "[[[[[[[[", "]]]]]]]]", "\x00", "\r"]
)  # fmt: skip
TOMLISH = st.lists(TOML_BITS | st.text(max_size=8), max_size=40).map("".join)


def assert_loads_or_names_the_file(folder: Path, name: str = "fuzz") -> None:
    found, problems = presetmod.load_all()
    assert "gpt2-seed" in found  # the others still load
    mine = [p for p in problems if Path(p.path).name == f"{name}.toml"]
    assert (name in found) != bool(mine)
    assert all(presetmod.GUARD_WORDS not in p.message for p in mine), mine  # foreseen, not caught
    assert len(mine) <= presetmod.MAX_PROBLEMS + 1
    try:
        presetmod.find(name)
    except ValueError as exc:
        assert f"{name}.toml" in str(exc)


@FUZZ
@given(text=TOMLISH)
def test_fuzzed_toml_text_never_crashes_loading(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "fuzz.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
        assert_loads_or_names_the_file(folder)


@FUZZ
@given(data=st.binary(max_size=200) | TOMLISH.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_fuzzed_bytes_never_crash_loading(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "fuzz.toml").write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
        assert_loads_or_names_the_file(folder)


@pytest.mark.parametrize(
    "text",
    [
        ".".join(["x"] * 100_000) + " = 1\n",  # 200 KB: tomllib took minutes over it
        "[" + ".".join(["x"] * 100_000) + "]\n",
        ".".join(['"x"'] * 50_000) + " = 1\n",
        "a = {" + " . ".join(["x"] * 50_000) + " = 1}\n",
        "[config]\n" + ".".join(["'x'"] * 17) + " = 1\n",  # just past the limit
    ],
    ids=["dotted", "table", "quoted", "inline", "seventeen"],
)
def test_a_deeply_dotted_key_is_refused_before_it_is_parsed(user_dir, monkeypatch, text):
    """Parse time grows with the square of a dotted key's parts, so depth is counted on the text
    first: the file is never given to tomllib, and every other preset still loads."""
    import tomllib

    loads = tomllib.loads

    def parse(text: str, **kw):
        assert len(text) < 1000, "a file of a deep key was given to tomllib"
        return loads(text, **kw)

    monkeypatch.setattr(tomllib, "loads", parse)
    (user_dir / "deep.toml").write_text(text)
    assert problems_of("deep.toml") == [
        "deep.toml: nested too deeply to read (over 16 levels of keys, tables and arrays)"
    ]
    result = presets_cli()
    assert result.exit_code == 0 and "gpt2-seed" in result.output
    assert "not loaded: deep.toml: nested too deeply" in result.output


def test_sixteen_levels_still_read(user_dir):
    (user_dir / "fine.toml").write_text("[config]\nb = 2\n[x]\n" + ".".join(["y"] * 15) + " = 1\n")
    assert problems_of("fine.toml") == [
        "fine.toml, key 'x': unknown key (known: description, source, config, timing)"
    ]


def test_escape_sequences_in_names_and_descriptions_are_shown_escaped(user_dir):
    (user_dir / "red\x1b[31m.toml").write_text('description = "\\u001b[2J\\u202eevil"\n[config]\nb = 1\n')
    (user_dir / "bad\x1b]0;title\x07.toml").write_text("nosuch = 1\n")
    result = CliRunner().invoke(main, ["presets"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output and "\x07" not in result.output
    assert "red\\x1b[31m" in result.output and "\\x1b[2J\\u202eevil" in result.output
    assert "not loaded: bad\\x1b]0;title\\x07.toml, line 1, key 'nosuch': unknown key" in result.output
    assert presetmod.find("red\\x1b[31m").config.b == 1  # found by the name it is shown with
    with pytest.raises(ValueError, match=re.escape("bad\\x1b]0;title\\x07.toml")):
        presetmod.find("bad\\x1b]0;title\\x07")


@pytest.mark.parametrize(
    "value,written",
    [("1979-05-27", "1979-05-27"), ("1979-05-27T07:32:00Z", "1979-05-27T07:32:00+00:00"),
     ("07:32:00", "07:32:00"), ("[1979-05-27]", "[1979-05-27]")],
)  # fmt: skip
def test_a_toml_date_is_quoted_as_written(user_dir, value, written):
    (user_dir / "date.toml").write_text(f"[timing]\nregime = {value}\n[config]\nb = {value}\n")
    assert problems_of("date.toml") == [
        f"date.toml, line 2, key 'regime': must be one of burst, sustained (got {written})",
        f"date.toml, line 4, key 'b': batch (b) must be a whole number (got {written})",
    ]


def test_every_problem_of_a_file_is_said_up_to_five(user_dir):
    """A value of the wrong type no longer hides the other keys' problems."""
    (user_dir / "three.toml").write_text('[config]\nb = "x"\nh_q = 3\nh_kv = 2\ndropout = 2.0\n')
    said = problems_of("three.toml")
    assert said[0] == "three.toml, line 2, key 'b': batch (b) must be a whole number (got 'x')"
    assert {p.split(", key ")[1].split("'")[1] for p in said} == {"b", "h_kv", "dropout"}
    (user_dir / "seven.toml").write_text(
        '[config]\nb = "x"\nh_q = 3\nh_kv = 2\ndropout = 2.0\nd_qk = "y"\nq = 1\nr = 2\n'
    )
    seven = problems_of("seven.toml")
    assert (
        len(seven) == presetmod.MAX_PROBLEMS + 1
        and seven[-1] == "seven.toml: and 1 more problem in this file"
    )
