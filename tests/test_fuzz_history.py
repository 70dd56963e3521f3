"""Fuzzing the run history's readers: any id (int or text), limit, offset, preset name or search,
over a history whose rows another tool wrote with columns of the wrong type, raises nothing but
KeyError (no such run) and HistoryError (a result that cannot be read), and `history` and `show`
exit 0 or 2 without a traceback.

CI runs a small derandomized budget (the same examples every run, a few seconds). The long run,
10,000 examples a test:  SDPA_FUZZ=long uv run pytest -n 0 tests/test_fuzz_history.py
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import zlib

import pytest
from click.testing import CliRunner
from fakes import RECORDED, TRAINING
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_fuzz import FUZZ, HUGE, TYPED

from tui.cli.main import main
from tui.store.history import COLUMN_NAMES, History, HistoryError
from tui.store.places import DATA_DIR_ENV, HISTORY_FILE

LONG = FUZZ.max_examples >= 10_000
CLI = FUZZ if LONG else settings(FUZZ, max_examples=25)  # a command renders a table: fewer in CI

INTS = st.integers() | HUGE | st.integers(-3, 8)
ODD_TEXT = st.sampled_from(["\udcff", "a\ud800", "\x00", "%", "_", "'; DROP TABLE runs; --", "gpt2-seed", ""])
TEXT = st.text(max_size=12) | TYPED | ODD_TEXT
IDS = st.integers(1, 5) | INTS | TEXT | INTS.map(str)
LIMITS = st.integers(1, 10) | INTS  # mostly a page that lists some
PRESETS = st.none() | st.sampled_from(["gpt2-seed", "bert-base"]) | TEXT
SEARCHES = st.just("") | st.sampled_from(["s1024", "ok", "H200", "bwd"]) | TEXT
INVALID_UTF8 = object()  # a text column's bytes that are no UTF-8, as a tool writing blobs as text leaves
SQL_INTS = st.integers(-(1 << 63), (1 << 63) - 1)
VALUES = (
    st.none() | SQL_INTS | st.floats() | st.text(max_size=8) | st.binary(max_size=8) | TYPED
    | st.just(INVALID_UTF8) | st.sampled_from([0, 1, -1.5, 1e300, float("inf"), "yesterday", b"\xff"])
)  # fmt: skip
COLUMNS = st.sampled_from((*COLUMN_NAMES, "result"))
RESULTS = st.sampled_from([b"", b"not zlib", zlib.compress(b"[]"), zlib.compress(b"{}"), zlib.compress(b"\xff"),
                           zlib.compress(b'{"config": 5}'), '{"status": "ok"}', 7, 2.5, "x"])  # fmt: skip
# writes of the wrong type into runs 1 to 3, and rows of only a result (every other column NULL)
WRITES = st.lists(st.tuples(st.integers(1, 3), COLUMNS, VALUES), max_size=5)
BARE_ROWS = st.lists(RESULTS, max_size=2)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A history of three runs (two presets), made once; each example writes into a copy of it."""
    path = tmp_path_factory.mktemp("kept") / HISTORY_FILE
    with History(path) as history:
        history.record_many([(RECORDED, "gpt2-seed", "run"), (TRAINING, None, "check"),
                             (RECORDED, "bert-base", "dashboard")])  # fmt: skip
    return path


def spoiled(kept, folder, writes, bare_rows):
    """A copy of `kept` with `writes` and `bare_rows` written by sqlite3 directly, as another tool would."""
    shutil.rmtree(folder, ignore_errors=True)  # the last example's file and its WAL
    folder.mkdir(parents=True)
    path = folder / HISTORY_FILE
    shutil.copyfile(kept, path)
    with sqlite3.connect(path) as conn:
        for run_id, column, value in writes:
            cast = "CAST(? AS TEXT)" if value is INVALID_UTF8 else "?"
            value = b"\xff\xfe" if value is INVALID_UTF8 else value
            # OR IGNORE: a NULL result, which the table refuses, leaves the run as it was
            conn.execute(f"UPDATE OR IGNORE runs SET {column} = {cast} WHERE id = ?", (value, run_id))
        for result in bare_rows:
            conn.execute("INSERT INTO runs (result) VALUES (?)", (result,))
    conn.close()
    return path


def read_everything(history: History, run_id, limit, offset, preset, search) -> None:
    rows = [*history.runs(limit=limit, offset=offset, search=search, preset=preset), *history.runs()]
    history.runs(limit=limit, status=preset, s_q=limit)
    total = history.count(search=search, preset=preset)
    assert isinstance(total, int) and total >= 0
    history.presets(limit)
    for row in rows:
        event(row.status)
        json.dumps(row.to_dict())
        assert isinstance(row.when, str)
    for one in dict.fromkeys((run_id, *(r.id for r in rows))):
        with contextlib.suppress(KeyError, HistoryError):  # no such run; a result that cannot be read
            history.load(one)


@FUZZ
@given(WRITES, BARE_ROWS, IDS, LIMITS, st.just(0) | INTS, PRESETS, SEARCHES)
def test_the_historys_readers_raise_nothing_unexpected(tmp_path, kept, writes, bare, run_id, limit, offset,
                                                       preset, search):  # fmt: skip
    path = spoiled(kept, tmp_path / "spoiled", writes, bare)
    for read_only in (False, True):
        with History(path, read_only=read_only) as history:
            read_everything(history, run_id, limit, offset, preset, search)


@FUZZ
@given(IDS, LIMITS, PRESETS)
def test_a_history_not_made_yet_reads_as_empty_and_makes_nothing(tmp_path, run_id, limit, preset):
    path = tmp_path / "never" / HISTORY_FILE
    with History(path, read_only=True) as history:
        assert history.runs(limit=limit, preset=preset) == [] and history.count(preset=preset) == 0
        with pytest.raises(KeyError):
            history.load(run_id)
    assert not path.parent.exists()


@CLI
@given(
    WRITES,
    BARE_ROWS,
    st.integers(1, 5) | st.integers(0, 2**70) | HUGE.filter(lambda n: n >= 0),
    LIMITS,
    PRESETS,
)
def test_history_and_show_exit_0_or_2_whatever_the_rows_ids_and_names(tmp_path, monkeypatch, kept, writes,
                                                                      bare, run_id, limit, preset):  # fmt: skip
    folder = tmp_path / "cli"
    spoiled(kept, folder, writes, bare)
    monkeypatch.setenv(DATA_DIR_ENV, str(folder))
    runner = CliRunner()
    listing = ["history", "--limit", str(limit), *(["--preset", preset] if preset is not None else [])]
    for args in (listing, [*listing, "--json"], ["show", str(run_id)]):
        out = runner.invoke(main, args)
        event(f"{args[0]} exit {out.exit_code}")
        assert out.exit_code in (0, 2) and not isinstance(out.exception, Exception | KeyboardInterrupt), (
            args, out.output, out.exception)  # fmt: skip
