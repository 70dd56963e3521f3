"""The known issues this machine has recorded (`hunt --record`), kept beside the built-in table of
model/known_issues.py: one JSON file in the user's data folder (platformdirs, as the run history's;
SDPA_EXPLORER_KNOWN_ISSUES names another file), written whole through files.atomic_write.

A file that cannot be read, or an entry that is not a record (model/issue_records.py), never
stops a run: the table still holds, and `problems` says what was left out and why.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from ..model.config import SdpaConfig
from ..model.issue_records import issue_of, pattern_of, problem, wrong_result_record
from ..model.known_issues import KNOWN_ISSUES, KnownIssue, parse_version
from ..model.results import Environment
from .files import atomic_write
from .reading import ParseError, ReadError, read_json

ENV_FILE = "SDPA_EXPLORER_KNOWN_ISSUES"
FORMAT = 1
MAX_BYTES = 4 << 20  # a record is a few hundred bytes
_cache: dict[str, tuple[tuple[int, int], tuple[KnownIssue, ...], tuple[str, ...]]] = {}


def default_path() -> Path:
    """SDPA_EXPLORER_KNOWN_ISSUES, else known_issues.json in the user data folder (places.data_dir)."""
    if os.environ.get(ENV_FILE):
        return Path(os.environ[ENV_FILE])
    from .places import data_dir

    return data_dir() / "known_issues.json"


def _records(path: Path) -> list[Any]:
    """The file's records as written (none where there is no file); ValueError where it is not ours."""
    if not path.exists():
        return []
    data = read_json(path, MAX_BYTES)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("issues"), list):
        raise ParseError(
            path, f'not a known-issues file (an object with "format": {FORMAT} and "issues": [...])'
        )
    return data["issues"]


def load(path: Path | None = None) -> tuple[tuple[KnownIssue, ...], tuple[str, ...]]:
    """The recorded issues that read, and a line for each that does not (or for the file). Read
    again only when the file changed."""
    path = path or default_path()
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        return (), ()
    cached = _cache.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2]
    issues: list[KnownIssue] = []
    problems: list[str] = []
    try:
        records = _records(path)
    except (ReadError, ParseError, ValueError) as exc:
        records, problems = [], [str(exc)]
    for i, record in enumerate(records):
        try:
            issues.append(issue_of(record))
        except ValueError as exc:
            problems.append(f"{path}: known issue {i + 1} left out: {exc}")
    _cache[str(path)] = (stamp, tuple(issues), tuple(problems))
    return tuple(issues), tuple(problems)


def recorded(path: Path | None = None) -> tuple[KnownIssue, ...]:
    """The recorded issues that read (known_issues.matching takes them beside the table)."""
    return load(path)[0]


def record(entry: dict[str, Any], path: Path | None = None) -> Path:
    """Add `entry` (issue_records.wrong_result_record makes one) to the file, replacing a record of
    the same key; the file written. ValueError, naming the field, for an entry that is not a
    record, one whose key a built-in issue has, or a file there that is not a known-issues file."""
    if (why := problem(entry)) is not None:
        raise ValueError(f"not a known issue: {why}")
    if entry["key"] in {i.key for i in KNOWN_ISSUES}:
        raise ValueError(f"the built-in table already has a known issue {entry['key']!r}: choose another key")
    path = path or default_path()
    records = [r for r in _records(path) if not (isinstance(r, dict) and r.get("key") == entry["key"])]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "issues": [*records, entry]}, indent=1) + "\n"
    return atomic_write(path, text)


def record_wrong_result(
    config: SdpaConfig,
    signature: dict[str, str],
    summary: str,
    env: Environment | None,
    bundle: str,
    where: Path | None = None,
) -> str:
    """One of the hunt's findings kept as a known wrong result: the class its shrunk `config` and
    `signature` (field -> value as typed, the options without which it passes) stand for
    (issue_records.pattern_of), seen on this cuDNN and GPU; seen again elsewhere, its versions and
    architectures grow. Its key."""
    version = (env.cudnn_backend_version if env else "") or ""
    if parse_version(version) is None:
        raise ValueError("the finding's environment names no cuDNN version to record it against")
    key = "hunt-" + (re.sub(r"[^a-z0-9]+", "-", summary.lower()).strip("-")[:60] or "finding")
    arch = (env.compute_capability if env else "").split(".")[0]
    archs = [int(arch)] if arch.isdigit() else []
    path = where or default_path()
    before = next((r for r in _records(path) if isinstance(r, dict) and r.get("key") == key), None)
    seen = [version]
    if before is not None and problem(before) is None:  # seen again: its versions and GPUs grow
        seen = sorted({*before["seen"], version}, key=parse_version)  # type: ignore[arg-type]
        archs = sorted({*before["archs"], *archs}) if before.get("archs") and archs else []  # []: any
    established = f"sdpa-explorer hunt, {time.strftime('%Y-%m-%d')}; bundle {bundle}"
    entry = wrong_result_record(
        key, summary, pattern_of(config, signature), version, established, tuple(archs)
    )
    record({**entry, "seen": seen}, path)
    return key
