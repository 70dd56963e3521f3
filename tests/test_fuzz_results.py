"""Fuzzing the saved-result reader: whatever JSON a file holds (any value, the wrong shape, nesting
100,000 deep, a real recording with parts swapped, dropped, wrapped or nested), RunResult.from_json
raises only its documented errors, and what it reads writes back and reads again the same.

CI runs a small derandomized budget (the profiles of tests/test_fuzz.py). The long run, 10,000
examples a test:  SDPA_FUZZ=long uv run pytest -n 0 tests/test_fuzz_results.py
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FUZZ, HUGE, JSON, TEXT

from tui.model.config import ConfigError
from tui.model.results import ResultError, RunResult
from tui.store.reading import ParseError, ReadError, read_json

DOCUMENTED = (ValueError, KeyError, TypeError, ConfigError, ResultError)
DATA = Path(__file__).parent / "data"
# recordings of every schema this version reads: 1.0, 1.1, 2.0 and 2.1 (FP8, peers, a training step)
SAVED = {
    p.name: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json")) if not p.name.startswith("explain")
}
DEEP = "\x00deep\x00"  # a placeholder the text of deep nesting replaces once the rest is JSON


def deep_text(depth: int, kind: str) -> str:
    """Nesting `depth` deep, written out (json.dumps itself would recurse that deep)."""
    opener, closer = {"list": ("[", "]"), "object": ('{"a":', "}"), "mixed": ('[{"a":', "}]")}[kind]
    return opener * depth + "1" + closer * depth


def places(value, path=()):
    """Every place in a parsed JSON value: the path of keys and indices to it."""
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield from places(inner, (*path, key))


def put(data, path, new):
    """`data` with the value at `path` replaced by `new` (the whole of it, for the empty path)."""
    if not path:
        return new
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return data


def drop(data, path):
    if path:
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    return data


def at(data, path):
    for key in path:
        data = data[key]
    return data


OTHER_SCALARS = st.none() | st.booleans() | st.integers() | HUGE | st.floats() | TEXT
CHANGES = st.sampled_from(["replace", "drop", "list", "object", "scalar", "deep"])


@st.composite
def mutated_recordings(draw) -> str:
    """A real recording's JSON text with one to three of its parts changed."""
    data = copy.deepcopy(SAVED[draw(st.sampled_from(sorted(SAVED)))])
    deep = None
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(places(data))))
        change = draw(CHANGES)
        if change == "replace":
            data = put(data, path, draw(JSON))
        elif change == "drop":
            data = drop(data, path)
        elif change in ("list", "object"):
            inner = at(data, path)
            data = put(data, path, [inner] if change == "list" else {"x": inner})
        elif change == "scalar":
            data = put(data, path, draw(OTHER_SCALARS))
        elif deep is None:
            deep = deep_text(
                draw(st.integers(1, 100_000)), draw(st.sampled_from(["list", "object", "mixed"]))
            )
            data = put(data, path, DEEP)
    text = json.dumps(data, allow_nan=True)
    return text if deep is None else text.replace(json.dumps(DEEP), deep)


def assert_reads_or_says_why(text: str) -> None:
    try:
        result = RunResult.from_json(text)
    except DOCUMENTED as exc:
        assert str(exc) or isinstance(exc, KeyError)
        return
    again = result.to_json()  # what it read is a result, whole (compared as text: nan is no nan)
    assert RunResult.from_json(again).to_json() == again


@FUZZ
@given(JSON)
def test_any_json_value_reads_or_says_why(value):
    assert_reads_or_says_why(json.dumps(value, allow_nan=True))


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["schema_version", "config", "status", "passes", "environment", "crash", "errors"])
        | st.text(max_size=6),
        JSON | st.sampled_from(["1.0", "1.1", "2.0", "2.5", "9"]),
        max_size=6,
    )
)
def test_objects_of_a_results_keys_read_or_say_why(data):
    assert_reads_or_says_why(json.dumps(data, allow_nan=True))


@FUZZ
@given(st.integers(1, 200_000), st.sampled_from(["list", "object", "mixed"]))
def test_deep_nesting_reads_or_says_why(depth, kind):
    assert_reads_or_says_why(deep_text(depth, kind))


@FUZZ
@given(mutated_recordings())
def test_a_recording_with_parts_changed_reads_or_says_why(text):
    assert_reads_or_says_why(text)


@FUZZ
@given(
    mutated_recordings() | JSON.map(json.dumps) | st.binary(max_size=64).map(lambda b: b.decode("latin-1"))
)
def test_a_file_of_any_of_these_reads_or_says_why(tmp_path_factory, text):
    """The way `show FILE` reads it: the file (its size and nesting bounded), then the result."""
    path = tmp_path_factory.mktemp("fuzz") / "result.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        data = read_json(path)
    except (ReadError, ParseError) as exc:
        assert "result.json" in str(exc)
        return
    with contextlib.suppress(DOCUMENTED):
        RunResult.from_dict(data)


@pytest.mark.parametrize("name", sorted(SAVED))
def test_every_recording_reads_unchanged(name):
    """The fuzzing's seeds themselves read, and read back the same."""
    result = RunResult.from_json((DATA / name).read_text())
    assert RunResult.from_json(result.to_json()) == result
