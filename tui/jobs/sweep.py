"""A sweep: one base configuration run at every point of a grid of varied fields, one row a point.

The grid is read from `--vary FIELD=VALUES` (a comma list, or a range `A..B` with a geometric
step `xK` or an arithmetic step `+K`), each value checked by the field it sets before anything
runs. Every point has a key (its varied values and the base configuration), so that a sweep
killed half-way resumes where it stopped, a slice of it runs on another host (`--shard`), and
the slices merge back into one table. A row is built from a RunResult in one place
(`point_row`); the JSON lines, the CSV (sweep_csv.py) and the printed table all read rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text

from ..model.config import ConfigError, SdpaConfig
from ..model.fields import FIELD, FIELDS, SHORTHANDS, Choice, Number, Switch, Whole, from_entries, quote
from ..model.gpu_peaks import Peak, peak_for, roofline
from ..model.results import Environment, PassResult, PeerResult, RunResult
from ..model.statuses import PASS_KINDS, STATUS_CRASH, STATUS_ERROR, STATUS_MISMATCH
from ..present.fastest import fastest_record, record_cell
from ..present.format import pass_short, peer_errors, peer_speedup, sci, status_style, status_word, us
from ..present.tables import FIGURE, NAME, WORDS, FitTable

MAX_VALUES = 10_000  # values one --vary may give: beyond it a range is a typo
MAX_POINTS = 100_000
MAX_NUMBER = 1 << 62  # a range's bound beyond it is a typo (and past what a float holds exactly)
FAILED_STATUSES = (STATUS_MISMATCH, STATUS_ERROR, STATUS_CRASH)  # a point that should not fail
PASS_COLUMNS = (
    "status", "kernel_us", "p10_us", "p90_us", "regime", "tflops", "bandwidth_gbs", "fastest_us",
    "max_abs_error", "passed", "flops", "io_bytes",
)  # fmt: skip
ROW_COLUMNS = ("status", "message", "label", "device", "gpu", "gpu_index")  # a point's own, after its vary.*
PEER_COLUMNS = ("name", "kernel_us", "tflops", "cudnn_speedup", "max_abs_error", "passed", "compile_seconds",
                "reason")  # fmt: skip
ROOFLINE_COLUMNS = (
    "peak", "peak_tflops", "peak_tbs", "intensity", "ridge", "bound", "attainable_tflops", "share",
)  # fmt: skip
_OPTION_NAMES = {f.option.removeprefix("--").replace("-", "_"): f.name for f in FIELDS}  # scale -> attn_scale


class SweepError(ValueError):
    """Bad sweep input, in one line that names its option."""


# ---- the grid ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Vary:
    """One --vary: the name typed, the fields it sets, and each value as the fields read it."""

    label: str
    names: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class Point:
    index: int  # its place in the whole grid (every shard counts the same)
    varied: dict[str, Any]  # label -> value, as rows show it
    config: SdpaConfig
    key: str


def field_names(label: str) -> tuple[str, ...]:
    """The fields a --vary name sets: a field (`s_q`, `h-kv`), an option's name (`scale`) or a
    shorthand (`s` sets s_q and s_kv)."""
    name = label.strip().lower().replace("-", "_")
    if name in SHORTHANDS:
        return SHORTHANDS[name]
    if name in FIELD or name in _OPTION_NAMES:
        return (_OPTION_NAMES.get(name, name),)
    known = ", ".join([*FIELD, *SHORTHANDS])
    raise SweepError(f"--vary {label}: unknown field (use one of {known})")


def _number(text: str, label: str) -> int | float:
    try:
        value = int(text)
    except ValueError:
        pass
    else:
        if abs(value) > MAX_NUMBER:
            raise SweepError(f"--vary {label}: {quote(text)} in a range is too large")
        return value
    try:
        value = float(text)
    except ValueError:
        raise SweepError(f"--vary {label}: {text!r} in a range is not a number") from None
    if not math.isfinite(value):
        raise SweepError(f"--vary {label}: {text!r} in a range is not a finite number")
    return value


def _shown(value: int | float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.12g}"


_RANGE = re.compile(r"(?P<a>.+?)\.\.(?P<b>[^x+]+)(?:(?P<op>[x+])(?P<k>.+))?")


def range_values(spec: str, label: str) -> list[str]:
    """`A..B` with a step: `1024..32768x2` (geometric), `1..8+1` or `1..8` (arithmetic)."""
    m = _RANGE.fullmatch(spec.replace(" ", ""))
    if m is None:
        raise SweepError(f"--vary {label}: {spec!r} is not a range A..B, A..BxK or A..B+K")
    a, b = _number(m["a"], label), _number(m["b"], label)
    op, k = m["op"] or "+", _number(m["k"] or "1", label)
    if a > b:
        raise SweepError(f"--vary {label}: the range {spec!r} runs backwards ({a} > {b})")
    if op == "x" and (k <= 1 or a <= 0):
        raise SweepError(f"--vary {label}: a geometric range needs A > 0 and a factor above 1 (got {spec!r})")
    if op == "+" and k <= 0:
        raise SweepError(f"--vary {label}: an arithmetic step must be positive (got {spec!r})")
    count = math.floor(math.log(b / a, k) + 1e-9) + 1 if op == "x" else math.floor((b - a) / k + 1e-9) + 1
    if count > MAX_VALUES:
        raise SweepError(f"--vary {label}: {spec!r} gives {count} values (at most {MAX_VALUES})")
    values = [a * k**i if op == "x" else a + i * k for i in range(count)]
    return [_shown(v if isinstance(v, int) else float(f"{v:.12g}")) for v in values]


def _typed(name: str, config: SdpaConfig, text: str) -> Any:
    """A varied value as rows show it: numbers, switches and choices typed; others as written."""
    field = FIELD[name]
    if isinstance(field, Whole | Number | Switch | Choice):
        return config.to_dict().get(name)
    return text.strip()


def parse_vary(text: str, base: SdpaConfig) -> Vary:
    """`FIELD=VALUES` -> Vary; every value is checked by the field it sets (against `base`)."""
    label, eq, spec = text.partition("=")
    label = label.strip()
    if not eq or not label or not spec.strip():
        raise SweepError(f"--vary {text}: give FIELD=VALUES, e.g. s=1024..32768x2 or d=64,128")
    names = field_names(label)
    if ".." in spec:
        texts = range_values(spec, label)
    else:  # a list; values that hold commas themselves (A,B modes, lengths) are split by ';'
        texts = [t.strip() for t in spec.split(";" if ";" in spec else ",")]
    seen: dict[Any, str] = {}
    for t in texts:
        if not t:
            raise SweepError(f"--vary {label}: an empty value in {spec!r}")
        config = _configured(base, {n: t for n in names}, f"--vary {label}")
        shown = json.dumps(_typed(names[0], config, t))
        if shown in seen:
            raise SweepError(f"--vary {label}: {t!r} is the same value as {seen[shown]!r}")
        seen[shown] = t
    return Vary(label, names, tuple(texts))


def _configured(base: SdpaConfig, entries: dict[str, str], option: str) -> SdpaConfig:
    """`base` with the entries; a value its field refuses (type, limits, choices) is a SweepError.
    Rules between fields are left to the engine, whose answer (invalid) is the point's row."""
    try:
        config = from_entries(entries, base)
    except ConfigError as exc:
        raise SweepError(f"{option}: {exc}") from None
    problems = [m for n in entries if (m := FIELD[n].problem(getattr(config, n)))]
    if problems:
        raise SweepError(f"{option}: {'; '.join(problems)}")
    return config


def point_key(base: SdpaConfig, varied: dict[str, Any]) -> str:
    """A point's identity: its varied values and the base configuration (what a resumed or a
    merged sweep compares)."""
    text = json.dumps({"base": base.to_dict(), "varied": varied}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def grid(base: SdpaConfig, varies: list[Vary]) -> list[Point]:
    """Every point: the cartesian product, the first --vary outermost, each list in its order."""
    labels = [v.label for v in varies]
    taken: dict[str, str] = {}
    for v in varies:
        for n in v.names:
            if n in taken:
                raise SweepError(f"--vary {v.label}: {n} is already varied by --vary {taken[n]}")
            taken[n] = v.label
    total = math.prod(len(v.texts) for v in varies)
    if total > MAX_POINTS:
        raise SweepError(f"--vary: {total} points (at most {MAX_POINTS})")
    points = []
    for index, texts in enumerate(itertools.product(*(v.texts for v in varies))):
        entries = {n: t for v, t in zip(varies, texts, strict=True) for n in v.names}
        config = _configured(base, entries, "--vary " + " and --vary ".join(labels))
        varied = {v.label: _typed(v.names[0], config, t) for v, t in zip(varies, texts, strict=True)}
        points.append(Point(index, varied, config, point_key(base, varied)))
    return points


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (I in 0..N-1, e.g. a Slurm array task id) -> (I, N)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if m is None or not 0 <= int(m[1]) < int(m[2]):
        raise SweepError(f"--shard: give I/N with 0 <= I < N, e.g. 0/8 (got {text!r})")
    return int(m[1]), int(m[2])


def shard(points: list[Point], i: int, n: int) -> list[Point]:
    """Slice i of n: every n-th point from the i-th, so that the slices are disjoint, cover the
    grid, and share its large and small shapes alike."""
    return [p for p in points if p.index % n == i]


def varied_words(varied: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in varied.items())


# ---- rows -------------------------------------------------------------------------------
def point_row(point: Point, result: RunResult) -> dict[str, Any]:
    """One point's row from its RunResult: what the JSON lines, the CSV and the table show."""
    env = result.environment
    gpu = env.gpu_name if env is not None else ""
    peak = peak_for(gpu) if gpu else None
    return {
        "index": point.index,
        "key": point.key,
        "varied": point.varied,
        "status": result.status,
        "message": result.message,
        "label": result.config.label(),
        "device": result.device,
        "gpu": gpu,
        "gpu_index": env.gpu_index if env is not None else None,
        "config": result.config.to_dict(),
        "passes": {p.kind: pass_row(p, result.config.dtype, peak) for p in result.passes},
        "versions": versions(env),  # what a chart's legend names
        "wall_seconds": round(result.wall_seconds, 3),
    }


def pass_row(p: PassResult, dtype: str, peak: Peak | None) -> dict[str, Any]:
    """A pass's figures: the heuristic plan's kernel time, the fastest plan's, the worst error."""
    t = p.timing
    fastest = p.plan(p.fastest_plan)
    errors = [c.cudnn.max_abs for c in p.checks if c.cudnn is not None]
    line = roofline(p.flops, p.io_bytes, dtype, peak, p.tflops, p.bandwidth_gbs) if peak else None
    figures = (
        p.status, t and t.median_us, t and t.p10_us, t and t.p90_us, t.regime if t else "", p.tflops,
        p.bandwidth_gbs, fastest.timing.median_us if fastest and fastest.timing else None,
        max(errors, default=None), p.passed, p.flops, p.io_bytes,
    )  # fmt: skip
    row = dict(zip(PASS_COLUMNS, figures, strict=True))
    row["roofline"] = None if line is None else {"peak": peak.name, **dataclasses.asdict(line)}
    if p.field_peers:
        row["peers"] = {peer.short: peer_row(p, peer) for peer in p.field_peers}
    if p.forms:  # the pass in its equivalent forms (engine/forms.py), by what each changes
        row["forms"] = {f.words: {"kernel_us": f.timing and f.timing.median_us, "passed": f.matches,
                                  "plan": f.plan, "reason": f.reason} for f in p.forms}  # fmt: skip
    row["fastest"] = fastest_record(p)  # the fastest way (present/fastest.py); None: no contest
    return row


def versions(env: Environment | None) -> dict[str, str]:
    """cuDNN, the frontend and torch as the point ran them ({} where not recorded)."""
    if env is None:
        return {}
    return {"cudnn": env.cudnn_backend_version, "frontend": env.frontend_version, "torch": env.torch_version}


def peer_row(p: PassResult, peer: PeerResult) -> dict[str, Any]:
    """A peer's figures at one point: its kernel time and TFLOPS, cuDNN's speed as a multiple of
    it, its error (of O; a backward's worst); or why it did not run."""
    error = peer_errors(p).get(peer.name)
    figures = (
        peer.name, peer.timing and peer.timing.median_us, peer.tflops, peer_speedup(p, peer),
        error and error.max_abs, error and error.passed, peer.compile_seconds, peer.reason,
    )  # fmt: skip
    return dict(zip(PEER_COLUMNS, figures, strict=True))


def read_rows(path: Path | str) -> tuple[list[dict], int, list[int]]:
    """A JSON-lines file's rows (objects with a string key), the bytes kept, and the numbers of the
    lines that are no row; a cut last line (a killed sweep's half row) is neither row nor kept."""
    data = Path(path).read_bytes()
    rows, bad, kept = [], [], len(data)
    lines = data.split(b"\n")
    for n, line in enumerate(lines):
        try:
            row = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            if n == len(lines) - 1 and line.lstrip().startswith(b"{"):
                kept -= len(line)
            else:
                bad.append(n + 1)
            continue
        if isinstance(row, dict) and isinstance(row.get("key"), str):
            rows.append(row)
        elif row is not None:
            bad.append(n + 1)
    return rows, kept, bad


def prepare_resume(path: Path) -> tuple[list[dict], list[int]]:
    """The rows already in a sweep's output, cut back to its last whole line (a killed sweep's half
    line goes) so that appending starts on a fresh line; and the lines that did not read."""
    rows, kept, bad = read_rows(path)
    with open(path, "r+b") as f:
        f.truncate(kept)
        if kept:
            f.seek(kept - 1)
            if f.read(1) != b"\n":
                f.write(b"\n")
    return rows, bad


def merge_rows(sources: list[tuple[str, list[dict]]]) -> tuple[list[dict], list[str]]:
    """One row per point key, the first file's where several hold it, in grid order; and a line
    for each point two files disagree on."""
    kept: dict[str, tuple[str, dict]] = {}
    disagreements = []
    for name, rows in sources:
        for row in rows:
            first = kept.setdefault(row["key"], (name, row))
            if first[1] is not row and _figures(first[1]) != _figures(row):
                disagreements.append(
                    f"{name} and {first[0]} disagree on point {varied_words(row.get('varied', {}))} "
                    f"({row['key']}): {_difference(first[1], row)}; kept {first[0]}'s"
                )
    merged = sorted((row for _name, row in kept.values()), key=lambda r: r.get("index", math.inf))
    return merged, disagreements


def _figures(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "wall_seconds"}


def _difference(a: dict, b: dict) -> str:
    if a.get("status") != b.get("status"):
        return f"status {a.get('status')} against {b.get('status')}"
    return "other figures (" + ", ".join(k for k in a if a.get(k) != b.get(k)) + ")"


# ---- the table (the CSV: sweep_csv.py) ----------------------------------------------------
def row_columns(rows: list[dict]) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The varied names, the passes, and each pass's peers that some row holds: a column (group) each."""
    labels = list(dict.fromkeys(k for r in rows for k in r.get("varied", {})))
    kinds = [k for k in PASS_KINDS if any(k in r.get("passes", {}) for r in rows)]
    peers = {
        k: list(dict.fromkeys(s for r in rows for s in r["passes"].get(k, {}).get("peers", {})))
        for k in kinds
    }
    return labels, kinds, peers


def share_cell(p: dict) -> str:
    """A point on the roofline: the share of the bounding peak reached, the bound, and its FLOP per
    byte against the GPU's ridge point ("61% compute, 1366/206 F/B")."""
    line = p.get("roofline") or {}
    share = line.get("share")
    if share is None:
        return "-"
    where = f", {line['intensity']:.0f}/{line['ridge']:.0f} F/B" if line.get("intensity") is not None else ""
    return f"{share * 100:.0f}% {line.get('bound', '')}{where}"


def peer_cell(peer: dict | None) -> str:
    """A peer's kernel time and cuDNN's speed against it, or '-' where it did not run."""
    if not peer or peer.get("kernel_us") is None:
        return "-"
    speed = peer.get("cudnn_speedup")
    return us(peer["kernel_us"]) + (f" ({speed:.2f}x)" if speed else "")


def _has_peaks(rows: list[dict]) -> bool:
    """Whether some point's share of the GPU's peak is known: the "of peak" columns show then."""
    return any((p.get("roofline") or {}).get("share") is not None for r in rows for p in r["passes"].values())


def _pass_cells(p: dict, peaks: bool, shorts: list[str], won: bool) -> list[str]:
    """A pass's cells in a point's row: kernel time, TFLOPS, worst error, share of peak, each peer."""
    tflops = p.get("tflops")
    cells = [us(p.get("kernel_us")), "-" if tflops is None else f"{tflops:.1f}", sci(p.get("max_abs_error"))]
    cells += [share_cell(p)] if peaks else []
    cells += [peer_cell((p.get("peers") or {}).get(short)) for short in shorts]
    return cells + ([record_cell(p.get("fastest"))] if won else [])


def _point_cells(r: dict, labels: list[str], kinds: list[str], peaks: bool, peers: dict, won: set) -> list:
    """A point's row: its varied values, its status, then each pass's cells."""
    cells: list = [Text(str(r.get("varied", {}).get(lab, "-"))) for lab in labels]
    cells.append(Text(status_word(r.get("status", "")), style=status_style(r.get("status", ""))))
    for kind in kinds:
        cells += _pass_cells(r.get("passes", {}).get(kind, {}), peaks, peers[kind], kind in won)
    return cells


def points_table(rows: list[dict], title: str) -> FitTable:
    """One row a point: its varied values, status, and each pass's kernel time, TFLOPS, worst
    error and share of the GPU's peak (where the GPU is known)."""
    (labels, kinds, peers), peaks = row_columns(rows), _has_peaks(rows)
    won = {
        k for k in kinds if any(r["passes"].get(k, {}).get("fastest") for r in rows)
    }  # a contest somewhere
    table = FitTable(title=Text(title))
    table.add_columns(labels, FIGURE)
    table.add_column("status", NAME)
    for n, kind in enumerate(kinds):  # where the width runs out the peers leave, then the shares of peak
        k = pass_short(kind)
        table.add_columns([f"{k} {col}" for col in ("kernel", "TFLOPS", "max err")], FIGURE)
        if peaks:
            table.add_column(f"{k} of peak", WORDS, justify="right", drop=100 + n)
        table.add_columns([f"{k} {col}" for col in peers[kind]], FIGURE, drop=10 * n)
        if kind in won:
            table.add_column(f"{k} fastest", NAME, drop=50 + n)  # the fastest way, and its margin
    for r in rows:
        table.add_row(*_point_cells(r, labels, kinds, peaks, peers, won))
    return table
