"""Fuzzing the plan cache's metadata: whatever an entry's JSON file holds (any JSON value, deep
nesting, a field of the wrong type, bytes that are no JSON at all), load() and entries() raise
nothing; an entry they cannot use is a miss, said once, and the `cache` command lists it.

CI runs a small derandomized budget (tests/test_fuzz.py's profiles). The long run, 10,000
examples a test:  SDPA_FUZZ=long uv run pytest -n 0 tests/test_fuzz_cache.py
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from test_fuzz import FUZZ, JSON, LONG

from tui.store.plan_cache import PlanCache

KEY = "k1"
BLOB = b"plan zero"
DIGEST = hashlib.sha256(BLOB).hexdigest()
GOOD = {
    "format": 1,
    "plans": [{"index": 0, "name": "eng0", "built": True}],
    "blobs": {"0": [f"{KEY}-0-{DIGEST[:16]}.plan", DIGEST]},
    "uids": {"q": 1, "o": 4},
    "heuristic_index": 0,
    "build_seconds": 0.4,
    "last_used": 1.0,
    "size": len(BLOB),
}
FIELDS = st.sampled_from([*GOOD, "extra"])
ODD = st.sampled_from([10**400, -(10**400), float("nan"), float("inf"), True, "9" * 5000, [], {}, None])
VALUES = JSON | ODD
# one blob's entry as the metadata names it: any index text, any value, or a name that leaves the folder
BLOB_ENTRIES = st.dictionaries(st.text(max_size=4) | st.sampled_from(["0", "-1", "١", "99999999999"]),
                               VALUES | st.sampled_from([["../k1-0-x.plan", DIGEST], [5, DIGEST],
                                                         [f"{KEY}-0-x.plan", 5], [f"{KEY}-0-x.plan"]]),
                               max_size=3)  # fmt: skip


def nested(depth: int, opener: str) -> str:
    closer = {"[": "]", '{"a": ': "}"}[opener]
    return opener * depth + "1" + closer * depth


METADATA = st.one_of(
    JSON.map(json.dumps),  # any JSON value at all
    st.builds(lambda field, value: json.dumps({**GOOD, field: value}), FIELDS, VALUES),  # one field wrong
    BLOB_ENTRIES.map(lambda blobs: json.dumps({**GOOD, "blobs": blobs})),
    st.builds(nested, st.integers(1, 200_000), st.sampled_from(["[", '{"a": '])),  # deep nesting
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),  # no JSON at all
    st.builds(lambda cut: json.dumps(GOOD)[:cut], st.integers(0, 200)),  # cut short
)
# a listing or a command costs more than one load: CI runs fewer of them
LISTED = FUZZ if LONG else settings(FUZZ, max_examples=25)


def cache_holding(folder: Path, metadata: str) -> PlanCache:
    (folder / f"{KEY}-0-{DIGEST[:16]}.plan").write_bytes(BLOB)
    (folder / f"{KEY}.json").write_text(metadata, encoding="utf-8", errors="surrogatepass")
    return PlanCache(folder)


@FUZZ
@given(METADATA)
def test_load_raises_nothing_and_a_bad_entry_is_a_miss_said_once(metadata):
    with tempfile.TemporaryDirectory() as folder:
        cache = cache_holding(Path(folder), metadata)
        found = cache.load(KEY)
        event("loaded" if found else "a miss")
        if found is None:
            assert len(cache.notes) == 1 and cache.notes[0].startswith("a cached plan was removed")
            assert not (Path(folder) / f"{KEY}.json").exists()
        else:
            entry, blobs = found
            assert blobs == {0: BLOB} and cache.notes == []


@FUZZ
@given(METADATA)
def test_entries_raise_nothing_and_list_a_bad_entry_as_unreadable(metadata):
    with tempfile.TemporaryDirectory() as folder:
        cache = cache_holding(Path(folder), metadata)
        listed = cache.entries()
        readable, unreadable = cache.survey()
        assert listed == readable and len(readable) + len(unreadable) == 1
        for e in readable:
            assert isinstance(e["size"], int) and isinstance(e["last_used"], float)
            assert all(isinstance(n, str) for n in e["names"])
        cache.evict()


@LISTED
@given(METADATA)
@example(json.dumps({**GOOD, "size": 10**400}))  # once an OverflowError in the size shown
def test_the_cache_command_raises_nothing(metadata):
    import os

    from click.testing import CliRunner

    from tui.cli.main import main

    with tempfile.TemporaryDirectory() as folder:
        cache_holding(Path(folder), metadata)
        env = {"SDPA_EXPLORER_CACHE_DIR": folder}
        for args in (["cache"], ["cache", "--json"], ["cache", "--clear"]):
            result = CliRunner(env=env).invoke(main, args)
            assert result.exit_code == 0 and result.exception is None, result.output
        assert os.listdir(folder) == []
