"""A sweep's rows as CSV: one line a point, its varied values, status, every field, then each
pass's figures, its roofline's, its fastest way's and each peer's (the rows are tui.jobs.sweep's)."""

from __future__ import annotations

import csv
import io
from typing import Any

from ..model.fields import FIELDS
from ..present.fastest import FASTEST_COLUMNS
from .sweep import PASS_COLUMNS, PEER_COLUMNS, ROOFLINE_COLUMNS, ROW_COLUMNS, row_columns


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(map(str, value))
    return value


def _flat_pass(kind: str, p: dict) -> dict[str, Any]:
    """A pass's figures by CSV column: its own, its roofline's and fastest way's, then each peer's."""
    flat = {f"{kind}.{c}": v for c, v in p.items() if c not in ("roofline", "peers", "fastest")}
    for part in ("roofline", "fastest"):
        flat.update({f"{kind}.{part}.{c}": v for c, v in (p.get(part) or {}).items()})
    for short, peer in (p.get("peers") or {}).items():
        flat.update({f"{kind}.peer.{short}.{c}": v for c, v in peer.items()})
    return flat


def _flat(r: dict) -> dict[str, Any]:
    """A row's figures by CSV column: its own, its varied values, its fields, then each pass's."""
    flat = {**r, **{f"vary.{k}": v for k, v in r.get("varied", {}).items()}, **r.get("config", {})}
    for kind, p in r.get("passes", {}).items():
        flat.update(_flat_pass(kind, p))
    return flat


def csv_text(rows: list[dict]) -> str:
    """The rows flattened: the varied values, status, every field, then each pass's figures."""
    labels, kinds, peers = row_columns(rows)
    pass_columns = [*PASS_COLUMNS, *(f"roofline.{c}" for c in ROOFLINE_COLUMNS)]
    head = ["index", "key", *(f"vary.{lab}" for lab in labels), *ROW_COLUMNS]
    tail = [
        f"{kind}.{c}" for kind in kinds for c in (*pass_columns, *(f"fastest.{f}" for f in FASTEST_COLUMNS))
    ]
    tail += [f"{kind}.peer.{short}.{c}" for kind in kinds for short in peers[kind] for c in PEER_COLUMNS]
    columns = [*head, *(f.name for f in FIELDS), *tail, "wall_seconds"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_cell(flat.get(c)) for c in columns] for flat in map(_flat, rows))
    return buf.getvalue()
