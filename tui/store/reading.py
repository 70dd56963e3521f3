"""The one way a file the user names is read (a saved result, a baseline, a sweep's rows, a check's
output, a preset), so that no file can hang, exhaust or crash the tool: only a regular file is
opened (a FIFO would block the read, /dev/zero never end it), without blocking, up to a size; its
nesting is counted on the raw text before it is parsed (parse time grows with it, and a parser
recurses once a level); and what it holds is checked against the shape its reader expects.

Errors are one line: ReadError (the file cannot be read; NotText, its bytes are not text) and
ParseError (its text is not what it should be; NotJson, not JSON at all), each naming the file; the
command adds the option it came from.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from .files import kind_words

MiB = 1 << 20
JSON_BYTES = 64 * MiB  # a result is tens of KB, a baseline or a check's output some MB
JSON_LINES_BYTES = 256 * MiB  # a sweep's rows: a KB or two a point
JSON_NESTING = 64  # a result nests about 10 levels, a baseline 3 more
TOML_NESTING = 16  # a preset nests 2; tomllib's time grows with the square of a dotted key's parts
SHOWN_PATH = 120  # characters of a path that a message repeats


def printable(text: str) -> str:
    """Text from a file or a file's name as a terminal may show it: characters that are not
    printable (escape sequences, bidirectional overrides) written as escapes, \\x1b for ESC."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown_path(path: Path | str) -> str:
    """A path as a message repeats it: printable, and a long one shortened."""
    text = printable(str(path))
    return text if len(text) <= SHOWN_PATH else text[: SHOWN_PATH - 1] + "…"


class ReadError(ValueError):
    """The file cannot be read: missing, not a regular file, too large, or not UTF-8 text."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(f"cannot read {shown_path(path)}: {why}")
        self.path, self.why = str(path), why


class ParseError(ValueError):
    """The file's text is not the format asked for, nests too deeply, or holds the wrong shape."""

    def __init__(self, path: Path | str, why: str, line: int | None = None) -> None:
        super().__init__(f"{shown_path(path)} is {why}")
        self.path, self.why, self.line = str(path), why, line


class NotText(ReadError):
    """The file's bytes are not UTF-8 text (a picture, a database, an archive)."""


class NotJson(ParseError):
    """The file's text is not JSON at all, not even its start (a CSV, a script, an empty file)."""


def read_bytes(path: Path | str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (links followed); else ReadError."""
    try:
        data, why = _regular_file_bytes(path, max_bytes)
    except OSError as exc:
        raise ReadError(path, exc.strerror or str(exc)) from exc
    except ValueError as exc:  # a path with a NUL byte
        raise ReadError(path, str(exc)) from exc
    if why:
        raise ReadError(path, why)
    if len(data) > max_bytes:
        raise ReadError(path, f"larger than {_size_words(max_bytes)}")
    return data


def _regular_file_bytes(path: Path | str, max_bytes: int) -> tuple[bytes, str]:
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        return b"", f"not a regular file ({kind_words(mode)}); only files are read"
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped since the look
            return b"", "not a regular file; only files are read"
        return f.read(max_bytes + 1), ""


def _size_words(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n:,} bytes"


def read_text(path: Path | str, max_bytes: int) -> str:
    """A regular file's UTF-8 text (a byte-order mark dropped); else ReadError."""
    data = read_bytes(path, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotText(path, f"not UTF-8 text (at byte {exc.start})") from exc


# ---- nesting, counted on the raw text -------------------------------------------------------
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.S)  # always ends: an unclosed one at the end
_BRACKETS = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# a dotted key's parts (bare or quoted), never started inside a word or a quoted part: linear time
_PART = r"""(?:[\w-]++|"(?:[^"\\\n]++|\\.)*+"|'[^'\n]*+')"""
_DOTTED = re.compile(rf"""(?<![\w"'\\-]){_PART}(?:[ \t]*+\.[ \t]*+{_PART})++""")


def _bracket_depth(text: str) -> int:
    """The deepest the brackets go: a parser stops at the first closer too many, so the running
    count over the text up to there is what it would nest."""
    return max(accumulate(map(_STEP.__getitem__, _BRACKETS.findall(text))), default=0)


def json_nesting(text: str) -> int:
    """How deep JSON text nests (arrays and objects), strings left out."""
    return _bracket_depth(_JSON_STRING.sub("", text))


def toml_nesting(text: str) -> int:
    """How deep TOML text nests, counted cheaply: the most parts of a dotted key (or any run of
    words joined by dots) and the deepest brackets, strings included (over-counting is safe)."""
    dotted = max((m.group().count(".") + 1 for m in _DOTTED.finditer(text)), default=1)
    return max(dotted, _bracket_depth(text))


JSON_LEVELS, TOML_LEVELS = "arrays and objects", "keys, tables and arrays"


def _too_deep(limit: int, levels: str) -> str:
    return f"nested too deeply to read (over {limit} levels of {levels})"


# ---- parsed --------------------------------------------------------------------------------
def parse_json(path: Path | str, text: str, max_nesting: int = JSON_NESTING) -> Any:
    """JSON text read from `path` -> its value; ParseError when it is not JSON or nests too deeply."""
    if json_nesting(text) > max_nesting:
        raise ParseError(path, _too_deep(max_nesting, JSON_LEVELS))
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and a number of too many digits
        damaged = text.lstrip()[:1] in ("{", "[")  # JSON cut short or mistyped: where it breaks helps
        raise (ParseError if damaged else NotJson)(
            path, f"not JSON: {exc}", getattr(exc, "lineno", None)
        ) from exc
    except RecursionError as exc:  # not after the count above; kept as the parser's own limit
        raise ParseError(path, _too_deep(max_nesting, JSON_LEVELS)) from exc


def read_json(path: Path | str, max_bytes: int = JSON_BYTES, max_nesting: int = JSON_NESTING) -> Any:
    """A regular file's JSON value; ReadError or ParseError name the file and say why."""
    return parse_json(path, read_text(path, max_bytes), max_nesting)


def read_toml(path: Path | str, max_bytes: int, max_nesting: int = TOML_NESTING) -> tuple[dict, str]:
    """A regular file's TOML (and its text, to find lines in); ReadError or ParseError say why."""
    text = read_text(path, max_bytes)
    if toml_nesting(text) > max_nesting:
        raise ParseError(path, _too_deep(max_nesting, TOML_LEVELS))
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise ParseError(path, f"not valid TOML: {exc}", int(line.group(1)) if line else None) from exc
    except RecursionError as exc:  # not after the count above; kept as the parser's own limit
        raise ParseError(path, _too_deep(max_nesting, TOML_LEVELS)) from exc


def read_json_lines(
    path: Path | str, shape: Any, max_bytes: int = JSON_LINES_BYTES, max_nesting: int = JSON_NESTING
) -> tuple[list[Any], list[int]]:
    """The values of a JSON-lines file that have `shape`, and the numbers of the lines that did not
    read (not UTF-8 JSON, nested too deeply, or of another shape). A last line cut short (a
    killed writer's half line) is neither."""
    lines = read_bytes(path, max_bytes).split(b"\n")
    values, bad = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = parse_json(path, line.decode("utf-8"), max_nesting)
        except (ParseError, UnicodeDecodeError):
            if not (n == len(lines) and line.lstrip().startswith(b"{")):
                bad.append(n)
            continue
        if shape_problem(value, shape):
            bad.append(n)
        else:
            values.append(value)
    return values, bad


# ---- shapes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Obj:
    """A JSON object: each key named, where present, of its shape; `required` keys present."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class Each:
    """A JSON object whose every value is of one shape (its keys any)."""

    shape: Any = object


NONE = type(None)
NUMBER = (int, float)
NUMBER_OR_NONE = (int, float, NONE)


def shape_problem(value: Any, shape: Any, where: str = "") -> str:
    """What is wrong with a parsed JSON value against `shape` ('' : nothing). A shape is a type or
    a tuple of types (true and false are no number unless bool is named), `[shape]` (a list of
    it), Obj, Each, or a tuple of shapes (any one of them)."""
    if isinstance(shape, tuple) and not all(isinstance(s, type) for s in shape):
        problems = [shape_problem(value, s, where) for s in shape]
        return "" if "" in problems else problems[-1]
    if isinstance(shape, type | tuple):
        return _type_problem(value, shape, where)
    problem, parts = (_list_parts if isinstance(shape, list) else _object_parts)(value, shape, where)
    return problem or next((p for inner, v, part in parts if (p := shape_problem(v, part, inner))), "")


Parts = Iterable[tuple[str, Any, Any]]  # each part of a value: where it is, it, and its shape


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def _type_problem(value: Any, shape: type | tuple[type, ...], where: str) -> str:
    """A value of a type, or of one of a tuple of types; bool counts only where it is named."""
    types = shape if isinstance(shape, tuple) else (shape,)
    number_not_bool = isinstance(value, bool) and not {bool, object} & set(types)
    if isinstance(value, types) and not number_not_bool:
        return ""
    return f"{_at(where)}must be {_kind(types)} (got {_kind((type(value),))})"


def _list_parts(value: Any, shape: list, where: str) -> tuple[str, Parts]:
    """A list's items, each of the one shape `[shape]` names."""
    if not isinstance(value, list):
        return f"{_at(where)}must be a list (got {_kind((type(value),))})", ()
    return "", ((f"{where}[{i}]", v, shape[0]) for i, v in enumerate(value))


def _object_parts(value: Any, shape: Obj | Each, where: str) -> tuple[str, Parts]:
    """An object's values: every one of Each's shape, or Obj's named keys of theirs (its required
    ones present)."""
    if not isinstance(value, dict):
        return f"{_at(where)}must be an object (got {_kind((type(value),))})", ()
    if isinstance(shape, Each):
        return "", ((_inside(where, k), v, shape.shape) for k, v in value.items())
    if missing := [k for k in shape.required if k not in value]:
        return f"{_at(where)}has no {missing[0]!r}", ()
    return "", ((_inside(where, k), v, shape.fields[k]) for k, v in value.items() if k in shape.fields)


def _inside(where: str, key: str) -> str:
    key = printable(key[:40])
    return f"{where}.{key}" if where else key


_KIND_WORDS = {dict: "an object", list: "a list", str: "text", int: "a number", float: "a number",
               bool: "true or false", NONE: "null"}  # fmt: skip


def _kind(types: tuple[type, ...]) -> str:
    return " or ".join(dict.fromkeys(_KIND_WORDS.get(t, t.__name__) for t in types))


# ---- the tool's own files, as a user names them back ---------------------------------------
_ROOFLINE = Obj(dict.fromkeys(("peak_tflops", "peak_tbs", "intensity", "ridge", "attainable_tflops", "share"),
                              NUMBER_OR_NONE) | {"peak": str, "bound": str})  # fmt: skip
_PEER_ROW = Obj(dict.fromkeys(("kernel_us", "tflops", "cudnn_speedup", "max_abs_error"), NUMBER_OR_NONE))
_PASS_ROW = Obj(
    dict.fromkeys(("kernel_us", "p10_us", "p90_us", "tflops", "bandwidth_gbs", "fastest_us", "max_abs_error"),
                  NUMBER_OR_NONE) | {"status": str, "regime": str, "roofline": (NONE, _ROOFLINE), "peers": Each(_PEER_ROW)}
)  # fmt: skip
SWEEP_ROW = Obj(
    {"key": str, "index": int, "varied": Each(), "config": Each(), "passes": Each(_PASS_ROW),
     "status": str, "message": str, "label": str, "wall_seconds": NUMBER},
    required=("key", "passes"),
)  # fmt: skip
_CASE_ROW = Obj({"case": str, "label": str, "status": str, "kernel_us": NUMBER_OR_NONE, "regime": str,
                 "stable": (bool, NONE)}, required=("case", "label", "status"))  # fmt: skip
CHECK_OUTPUT = Obj({"gpu": Each(), "cases": [_CASE_ROW], "gpus": [Obj({"host": str, "cases": [_CASE_ROW]})]})


def read_check_output(path: Path | str) -> dict | None:
    """`check --json`'s output (one GPU's, or `--gpus`'s), or None when the file is not one (a
    sweep's rows, say); ReadError when it cannot be read, ParseError when it is one of the wrong shape."""
    try:
        data = read_json(path)
    except ParseError:
        return None
    if not (isinstance(data, dict) and ("cases" in data or "gpus" in data)):
        return None
    if problem := shape_problem(data, CHECK_OUTPUT):
        raise ParseError(path, f"not a check --json output: {problem}")
    return data
