"""The run history: every run appended to a local SQLite database, so that last week's result
(another driver, another cuDNN) can be listed, reopened and compared with today's.

A row a run: the columns the list filters on, indexed, and the whole RunResult as JSON
(zlib-compressed; read back through RunResult.from_json, so rows written under an older result
schema still load). WAL mode and one transaction a run: a crash mid-write loses at most that
run, never an earlier one. Writing history never fails a run: `record` says in one line why it
could not, and returns None. Reading never needs to write: where the folder or the disk cannot take
a write (read-only, full), the history is read through a read-only connection. A row another tool
(or an older version) wrote with a column of the wrong type is listed as unreadable.

Headless (no Textual): the CLI writes and reads it here, and so will the dashboard.
"""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.results import Environment, RunResult
from .baseline import Comparison as Comparison
from .baseline import compare as compare
from .places import history_path

SCHEMA = 2  # PRAGMA user_version: the table's shape, apart from the results' own schema (2: `searched`)
BUSY_S = 5.0  # how long a write waits for another process's transaction before it gives up

SHAPE_FIELDS = ("b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v")
FILTERS = ("preset", "status", "source", "label", "dtype", "layout", "causal", "cudnn", "frontend",
           "torch", "gpu", "driver", "host", *SHAPE_FIELDS)  # fmt: skip
SEARCHED = ("label", "preset", "status", "gpu", "cudnn", "frontend")  # what `search` looks in
# ... as one column, computed and indexed: a search reads the index, one LIKE a run, not the table's
# rows (a result each) with six; char(31) between the fields, so a search never spans two
SEARCHED_SQL = " || char(31) || ".join(f"coalesce({name}, '')" for name in SEARCHED)
_SQL_TYPES = {"int": "INTEGER", "bool": "INTEGER", "float": "REAL", "float | None": "REAL"}  # else TEXT
# what a column of each declared type may hold as SQLite gives it back (NULL text reads as '')
_READ_TYPES = {"int": (int,), "bool": (int,), "float": (int, float), "float | None": (int, float, type(None)),
               "str": (str, type(None)), "str | None": (str, type(None))}  # fmt: skip
_EMPTY = {"int": 0, "bool": False, "float": 0.0, "str": ""}  # an unreadable column's value (else None)
SQL_INT_MAX = (1 << 63) - 1  # the largest integer SQLite holds
UNREADABLE = "unreadable"  # the status of a row whose columns hold values of the wrong type


class HistoryError(Exception):
    """The history could not be read or written; the message names the file."""


@dataclass(frozen=True)
class HistoryRow:
    """One run as the list shows it (the whole result is `History.load(id)`)."""

    id: int
    recorded_at: float  # seconds since the epoch
    source: str  # who ran it: "run", "check", "sweep", "dashboard"
    preset: str | None  # the preset it started from
    label: str  # SdpaConfig.label()
    b: int
    h_q: int
    h_kv: int
    s_q: int
    s_kv: int
    d_qk: int
    d_v: int
    dtype: str
    layout: str
    causal: str
    backward: bool
    status: str
    message: str
    cudnn: str  # the cuDNN backend as the frontend loaded it
    frontend: str
    torch: str
    gpu: str
    driver: str
    host: str
    kernel_us: float | None  # the forward's heuristic pick, median
    regime: str
    schema_version: str  # of the result as it was written

    @property
    def when(self) -> str:
        """Local time, to the second: how a person finds a run again ('?' where it is no time)."""
        shown = _local_time(self.recorded_at)
        return time.strftime("%Y-%m-%d %H:%M:%S", shown) if shown else "?"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "when": self.when}


# the table's columns after its id, as HistoryRow declares them: (column, SQL type)
COLUMNS = tuple((f.name, _SQL_TYPES.get(f.type, "TEXT")) for f in dataclasses.fields(HistoryRow))[1:]
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


def row_values(result: RunResult, preset: str | None, source: str) -> dict[str, Any]:
    """The filter columns of one run."""
    c, env = result.config, result.environment or Environment(gpu_available=False)
    forward = result.forward
    timing = forward.timing if forward else None
    return {
        "recorded_at": time.time(),
        "source": source,
        "preset": preset,
        "label": c.label(),
        **{name: getattr(c, name) for name in SHAPE_FIELDS},
        "dtype": c.dtype,
        "layout": c.layout,
        "causal": c.causal,
        "backward": int(bool(c.backward)),
        "status": result.status,
        "message": result.message,
        "cudnn": env.cudnn_backend_version,
        "frontend": env.frontend_version,
        "torch": env.torch_version,
        "gpu": env.gpu_name,
        "driver": env.driver_version,
        "host": env.host,
        "kernel_us": timing.median_us if timing else None,
        "regime": timing.regime if timing else "",
        "schema_version": result.schema_version,
    }


class History:
    """The history database at `path` (default: the user data folder). One connection, opened
    when first used and usable from any thread, one call at a time (a dashboard's worker); a
    write is one transaction. Another process may write meanwhile: WAL lets readers go on."""

    def __init__(self, path: Path | str | None = None, read_only: bool = False) -> None:
        self.path = Path(path) if path is not None else history_path()
        self.read_only = read_only  # only read: never make the folder, the file or its WAL
        self._conn: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None  # read-only, where the writer cannot open

    def __enter__(self) -> History:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in (self._conn, self._reader):
            if conn is not None:
                conn.close()
        self._conn = self._reader = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_S, check_same_thread=False)
            conn.text_factory = _text
            try:
                _prepare(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _read_connection(self) -> sqlite3.Connection:
        """The writer's connection where it opens, else a read-only one (a read-only or full disk)."""
        if self._conn is not None:
            return self._conn
        if self._reader is not None:
            return self._reader
        if not self.read_only:
            try:
                return self._connect()
            except (sqlite3.Error, OSError):
                pass  # read what is there without writing
        self._reader = _open_read_only(self.path)
        return self._reader

    def _failed(self, exc: Exception) -> HistoryError:
        return HistoryError(f"{self.path}: {getattr(exc, 'strerror', None) or exc}")

    def record(self, result: RunResult, preset: str | None = None, source: str = "cli") -> int:
        """Append one run in a transaction of its own; its id. HistoryError when it cannot be written."""
        return self.record_many([(result, preset, source)])[0]

    def record_many(self, runs: Iterable[tuple[RunResult, str | None, str]]) -> list[int]:
        """Append (result, preset, source) runs in one transaction, all or none (generated rows,
        an import); their ids."""
        sql = f"INSERT INTO runs ({', '.join(COLUMN_NAMES)}, result) VALUES ({', '.join('?' * (len(COLUMNS) + 1))})"
        try:
            conn = self._connect()
            with conn:  # the rows are there whole or not at all
                return [int(conn.execute(sql, _insert_values(*run)).lastrowid) for run in runs]
        except (sqlite3.Error, OSError) as exc:
            raise self._failed(exc) from exc

    def runs(self, limit: int = 100, offset: int = 0, search: str = "", **where: Any) -> list[HistoryRow]:
        """Newest first. `where`: a column of FILTERS and the value it must equal (None: any);
        `search`: text found in the label, preset, status, GPU or versions."""
        source, sql, args = self._where(search, where)
        limit, offset = _count_of(limit), _count_of(offset)
        select, page = f"SELECT id, {', '.join(COLUMN_NAMES)} FROM runs", "ORDER BY id DESC LIMIT ? OFFSET ?"
        if source != "runs":  # the page's ids from the search's index, then only their rows
            query = f"{select} WHERE id IN (SELECT id FROM {source}{sql} {page}) ORDER BY id DESC"
        else:
            query = f"{select}{sql} {page}"
        return [_row(r) for r in self._read(query, (*args, limit, offset))]

    def count(self, search: str = "", **where: Any) -> int:
        """How many runs match, as `runs` filters them."""
        source, sql, args = self._where(search, where)
        found = self._read(f"SELECT COUNT(*) FROM {source}{sql}", args)
        return int(found[0][0]) if found else 0

    def presets(self, limit: int = 5) -> list[str]:
        """The presets that runs came from, the most recently run first."""
        found = self._read(
            "SELECT preset FROM runs WHERE preset IS NOT NULL GROUP BY preset ORDER BY max(id) DESC LIMIT ?",
            (_count_of(limit),),
        )
        return [str(name) for (name,) in found]

    def load(self, run_id: int) -> RunResult:
        """The whole result of run `run_id`; KeyError when there is none."""
        found = self._read("SELECT result FROM runs WHERE id = ?", (run_id,))
        if not found:
            raise KeyError(f"no run {run_id} in the history ({self.path})")
        data = found[0][0]
        try:
            text = zlib.decompress(data).decode("utf-8") if isinstance(data, bytes) else data
            if not isinstance(text, str):
                raise TypeError(f"its result is {type(text).__name__}, not JSON")
            return RunResult.from_json(text)
        except (zlib.error, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HistoryError(f"{self.path}: run {run_id} cannot be read: {exc}") from exc

    @staticmethod
    def _where(search: str, where: dict[str, Any]) -> tuple[str, str, tuple]:
        """What to read (the table, or for a search alone its index) and the WHERE clause."""
        unknown = sorted(set(where) - set(FILTERS))
        if unknown:
            raise ValueError(f"cannot filter history on {', '.join(unknown)} (only {', '.join(FILTERS)})")
        given = {k: v for k, v in where.items() if v is not None}
        terms = [f"{name} = ?" for name in given]
        args: list[Any] = list(given.values())
        if search:
            terms.append("searched LIKE ?")
            args.append(f"%{search}%")
        source = "runs INDEXED BY runs_searched" if search and not given else "runs"
        return source, (" WHERE " + " AND ".join(terms) if terms else ""), tuple(args)

    def _read(self, sql: str, args: tuple) -> list[tuple]:
        if not self.path.exists() and self._conn is None:
            return []  # nothing recorded yet: no file made just to say so
        try:
            return self._read_connection().execute(sql, args).fetchall()
        except (OverflowError, UnicodeEncodeError):
            return []  # a value no row holds: an integer past SQLite's, text that is no UTF-8
        except (sqlite3.Error, OSError) as exc:
            raise self._failed(exc) from exc


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A connection that never writes: read-only, and where not even WAL's shared-memory file can
    be made (a read-only folder, a full disk), immutable: the file as it lies."""
    for extra in ("", "&immutable=1"):
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=ro{extra}", uri=True, check_same_thread=False
        )
        conn.text_factory = _text
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.Error:
            conn.close()
            if extra:
                raise
    raise AssertionError  # unreachable: the immutable attempt returns or raises


def _count_of(n: int) -> int:
    """A LIMIT or OFFSET of any int, as SQLite takes it: none below 0, all there are above its integers."""
    return min(max(n, 0), SQL_INT_MAX)


def _text(data: bytes) -> str | bytes:
    """A text column as str; bytes where it is no UTF-8, so that its row reads as unreadable."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _local_time(seconds: object) -> time.struct_time | None:
    """`seconds` since the epoch as local time; None where it is no time of a run."""
    if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        return None
    try:
        return time.localtime(seconds)
    except (OverflowError, OSError, ValueError):
        return None


def stored_result(result: RunResult) -> bytes:
    """The result column of a run: its JSON, zlib-compressed."""
    return zlib.compress(result.to_json(indent=None).encode("utf-8"))


def _insert_values(result: RunResult, preset: str | None, source: str) -> tuple:
    values = row_values(result, preset, source)
    return (*(values[name] for name in COLUMN_NAMES), stored_result(result))


_ROW_TYPES = {f.name: str(f.type) for f in dataclasses.fields(HistoryRow)}


def _row(r: tuple) -> HistoryRow:
    """A row as the list shows it; one whose columns hold the wrong types, as unreadable: the
    columns that read, and the first one that does not named in its message."""
    stored = dict(zip(("id", *COLUMN_NAMES), r, strict=True))
    wrong = [name for name, kind in _ROW_TYPES.items() if not isinstance(stored[name], _READ_TYPES[kind])]
    if "recorded_at" not in wrong and _local_time(stored["recorded_at"]) is None:
        wrong.append("recorded_at")
    values = {
        name: "" if value is None and _ROW_TYPES[name] == "str" else value for name, value in stored.items()
    }
    values.update({name: _EMPTY.get(_ROW_TYPES[name]) for name in wrong})
    row = HistoryRow(**{**values, "backward": bool(values["backward"])})
    if not wrong:
        return row
    shown = repr(stored[wrong[0]])
    words = f"this row cannot be read: its {wrong[0]} is {shown if len(shown) <= 40 else shown[:37] + '...'}"
    return dataclasses.replace(row, status=UNREADABLE, message=words)


_PREPARING = threading.Lock()  # one thread of this process prepares a file at a time


def _prepare(conn: sqlite3.Connection) -> None:
    """WAL, and the table and its indexes where this file is new (the searched column and its index
    added to a file of schema 1). The dashboard's first kept run and the History pane's first read
    may open a new file at once, as may two processes: one prepares it, the other waits (a lock
    of SQLite's own that it would not wait for is tried again until BUSY_S has passed)."""
    deadline = time.monotonic() + BUSY_S
    with _PREPARING:
        while True:
            try:
                _prepare_once(conn)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


def _prepare_once(conn: sqlite3.Connection) -> None:
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(f"the database cannot use WAL mode (it is in {mode} mode)")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash of the app loses nothing committed
    if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA:
        return
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    with conn:
        conn.execute("BEGIN IMMEDIATE")  # one writer makes the table; another waits, then finds it made
        if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA:
            return
        conn.execute(f"CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                     f"{columns}, result BLOB NOT NULL)")  # fmt: skip
        for name in FILTERS:  # each with the id, so that a filtered list comes newest first unsorted
            conn.execute(f"CREATE INDEX IF NOT EXISTS runs_{name} ON runs ({name}, id)")
        if not any(c[1] == "searched" for c in conn.execute("PRAGMA table_xinfo(runs)")):
            conn.execute(
                f"ALTER TABLE runs ADD COLUMN searched TEXT GENERATED ALWAYS AS ({SEARCHED_SQL}) VIRTUAL"
            )
        conn.execute("CREATE INDEX IF NOT EXISTS runs_searched ON runs (searched)")
        conn.execute(f"PRAGMA user_version = {SCHEMA}")


def record(
    result: RunResult,
    preset: str | None = None,
    source: str = "cli",
    warn: Callable[[str], None] | None = None,
    path: Path | str | None = None,
) -> int | None:
    """Append a run to the history; its id, or None when it could not be written, said in one
    line to `warn` (default: standard error) and nothing more: history never fails a run."""
    try:
        with History(path) as history:
            return history.record(result, preset, source)
    except HistoryError as exc:
        (warn or _to_stderr)(f"warning: run not kept in the history: {exc}")
        return None


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)
