"""Compiled plans kept on disk across launches, so a graph built once loads in milliseconds.

An entry is one graph on one machine: the key hashes the graph's JSON, the pass, the heuristic
modes and the GPU, driver, cuDNN and frontend versions, so an upgrade never loads a stale plan.
It holds each built plan's serialized blob (the frontend's serialize() of that plan selected)
and what the run reports of the plans without building them again.

The blobs are native code that cuDNN loads, so the cache trusts only what it wrote: it reads a
folder it created itself (owned by this user, writable by no one else), writes every file 0600,
and checks each blob's SHA-256 before handing it over. It reads only regular files inside that
folder (no link followed out of it, no FIFO or device opened), each of a bounded size, and checks
the shape of an entry's metadata before using any of it. An entry that fails any check, or that
cuDNN will not load, is removed; the graph is then built as if never cached, with a note.
Entries past the size cap go least recently used first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import math
import os
import re
import stat
import time
from pathlib import Path
from typing import Any

from .files import atomic_write, kind_words
from .places import plan_cache_folder
from .private import FolderRefused, private_folder

DEFAULT_CAP_BYTES = 512 << 20  # ~5,000 plans of 70-100 KB (H200: 70-96 KB each)
FORMAT = 1  # of an entry's metadata; another format is a miss, never an error
META_MAX_BYTES = 4 << 20  # an entry's metadata: a few hundred plans described, far below this
BLOB_MAX_BYTES = 64 << 20  # a serialized plan: 70-100 KB on the H200
_DIGEST = re.compile(r"[0-9a-f]{64}")
_JSON_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true or false",
               type(None): "null"}  # fmt: skip


class BadEntry(ValueError):
    """An entry that cannot be used as it is (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One graph's cached plans: index -> blob file and its hash, and the plans as reported."""

    key: str
    plans: list[dict[str, Any]]  # PlanResult dicts, as the build described them
    blobs: dict[int, tuple[str, str]]  # plan index -> (file name, sha256)
    uids: dict[str, int]  # graph tensor name -> uid, for a loaded graph's variant pack
    heuristic_index: int | None
    build_seconds: float  # what planning and building cost when the entry was made
    last_used: float
    size: int


def fingerprint(environment: Any) -> str:
    """What a compiled plan depends on besides its graph: the GPU and the software below us."""
    e = environment
    return "|".join(
        str(x)
        for x in (
            e.gpu_name,
            e.compute_capability,
            e.driver_version,
            e.cudnn_backend_version,
            e.frontend_version,
        )
    )


def entry_key(graph_json: str, kind: str, heuristics: tuple[str, ...], machine: str) -> str:
    text = json.dumps([FORMAT, graph_json, kind, list(heuristics), machine])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def read_regular(folder: Path, name: str, limit: int) -> bytes:
    """The bytes of the regular file `name` directly in `folder`, at most `limit` of them: a link,
    a FIFO, a device or a folder there is refused without being followed or waited on (BadEntry),
    as is a larger file; OSError when it cannot be read (FileNotFoundError: absent)."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise BadEntry(f"{name!r} is not a file name of the cache's folder")
    path = folder / name
    mode = os.lstat(path).st_mode
    if not stat.S_ISREG(mode):
        raise BadEntry(f"{name} is {kind_words(mode)}, not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # a file swapped for a link or a FIFO since: refused or not waited on
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadEntry(f"{name} is {kind_words(st.st_mode)}, not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise BadEntry(f"{name} is larger than {limit} bytes")
    return data


def entry_from(key: str, meta: Any) -> Entry:
    """The entry that `meta` (an entry's metadata, as parsed) describes; BadEntry naming what is
    wrong when it is not the shape the cache writes."""
    if not isinstance(meta, dict):
        raise BadEntry(f"its metadata is {_JSON_KINDS.get(type(meta), 'not JSON')}, not an object")
    if meta.get("format") != FORMAT:
        raise BadEntry("it was written in another format")
    missing = [f for f in ("plans", "blobs", "uids", "heuristic_index", "build_seconds", "last_used", "size")
               if f not in meta]  # fmt: skip
    if missing:
        raise BadEntry(f"its metadata lacks {', '.join(missing)}")
    for ok, why in METADATA_RULES:
        if not ok(key, meta):
            raise BadEntry(why)
    return Entry(
        key=key,
        plans=meta["plans"],
        blobs={int(i): (name, digest) for i, (name, digest) in meta["blobs"].items()},
        uids=dict(meta["uids"]),
        heuristic_index=meta["heuristic_index"],
        build_seconds=_seconds(meta, "build_seconds"),
        last_used=_seconds(meta, "last_used"),
        size=meta["size"],
    )


def _plans_ok(key: str, meta: dict) -> bool:
    return isinstance(meta["plans"], list) and all(isinstance(p, dict) for p in meta["plans"])


def _blobs_ok(key: str, meta: dict) -> bool:
    blobs = meta["blobs"]
    return isinstance(blobs, dict) and bool(blobs) and all(_blob_ok(key, i, b) for i, b in blobs.items())


def _uids_ok(key: str, meta: dict) -> bool:
    return isinstance(meta["uids"], dict) and all(_whole(u) for u in meta["uids"].values())


def _heuristic_ok(key: str, meta: dict) -> bool:
    return meta["heuristic_index"] is None or _whole(meta["heuristic_index"])


def _size_ok(key: str, meta: dict) -> bool:
    size = meta["size"]  # the blobs are checked first: their count bounds it
    return _whole(size) and 0 <= size <= len(meta["blobs"]) * BLOB_MAX_BYTES


# each part of an entry's metadata and what is said when it is not the shape the cache writes
METADATA_RULES = (
    (_plans_ok, "its plans are not a list of objects"),
    (_blobs_ok, "its blobs are not plan indexes, each with a file name and a SHA-256"),
    (_uids_ok, "its uids are not tensor names with whole numbers"),
    (_heuristic_ok, "its heuristic_index is not a whole number"),
    (_size_ok, "its size is not a whole number of bytes its blobs could hold"),
)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _blob_ok(key: str, index: Any, blob: Any) -> bool:
    """A blob as the cache names it: "index": ["KEY-index-....plan", sha256]."""
    if not (isinstance(index, str) and index.isascii() and index.isdigit() and len(index) < 10):
        return False
    if not (isinstance(blob, list) and len(blob) == 2 and all(isinstance(x, str) for x in blob)):
        return False
    name, digest = blob
    return (
        name.startswith(f"{key}-")
        and name.endswith(".plan")
        and "/" not in name
        and bool(_DIGEST.fullmatch(digest))
    )


def _seconds(meta: dict, field: str) -> float:
    value = meta[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadEntry(f"its {field} is not a number")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise BadEntry(f"its {field} is not a finite number")
    return seconds


class PlanCache:
    """The folder of entries. Every method says what went wrong in `notes` rather than raising:
    a cache is never a reason for a run to fail."""

    def __init__(self, folder: Path | None = None, cap_bytes: int = DEFAULT_CAP_BYTES):
        self.folder = Path(folder) if folder is not None else plan_cache_folder()
        self.cap_bytes = cap_bytes
        self.notes: list[str] = []

    # ---- the folder --------------------------------------------------------------------
    def ready(self) -> bool:
        """Create the folder (0700) or check the one there: ours and writable by no one else."""
        try:
            private_folder(self.folder)
        except (OSError, FolderRefused) as exc:
            self.notes.append(f"plan cache off: {exc}")
            return False
        return True

    def _meta(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    # ---- reading ---------------------------------------------------------------------------
    def load(self, key: str) -> tuple[Entry, dict[int, bytes]] | None:
        """The entry and its blobs, each checked against its hash; None on a miss. A corrupt
        entry is removed (noted) and counts as a miss."""
        if not self.ready():
            return None
        try:
            meta = self._read_meta(f"{key}.json")
        except FileNotFoundError:
            return None
        except (OSError, BadEntry) as exc:
            return self._drop(key, f"its metadata cannot be read ({_words(exc)})")
        try:
            entry = entry_from(key, meta)
        except BadEntry as exc:
            return self._drop(key, str(exc))
        blobs = {}
        for index, (name, digest) in entry.blobs.items():
            try:
                blob = read_regular(self.folder, name, BLOB_MAX_BYTES)
            except (OSError, BadEntry) as exc:
                return self._drop(key, f"plan {index}'s blob cannot be read ({_words(exc)})")
            if hashlib.sha256(blob).hexdigest() != digest:
                return self._drop(key, f"plan {index}'s blob does not match its hash")
            blobs[index] = blob
        self._touch(self._meta(key), meta)
        return entry, blobs

    def _read_meta(self, name: str) -> Any:
        """An entry's metadata as parsed (any JSON value); BadEntry or OSError when unreadable."""
        data = read_regular(self.folder, name, META_MAX_BYTES)
        try:
            return json.loads(data.decode("utf-8"))
        except RecursionError:
            raise BadEntry(f"{name} is nested too deep") from None
        except ValueError as exc:  # not UTF-8, or not JSON
            raise BadEntry(f"{name} is not JSON: {exc}") from None

    def _touch(self, path: Path, meta: dict[str, Any]) -> None:
        meta["last_used"] = time.time()
        with contextlib.suppress(OSError):
            self._write(path, json.dumps(meta).encode())

    # ---- writing ---------------------------------------------------------------------------
    def store(
        self,
        key: str,
        plans: list[dict[str, Any]],
        blobs: dict[int, bytes],
        uids: dict[str, int],
        heuristic_index: int | None,
        build_seconds: float,
    ) -> bool:
        """Write an entry: each blob 0600 under its hash, then the metadata that names them (a
        reader never sees metadata before its blobs). Then evict down to the cap."""
        if not blobs or not self.ready():
            return False
        try:
            named = {}
            for index, blob in blobs.items():
                digest = hashlib.sha256(blob).hexdigest()
                name = f"{key}-{index}-{digest[:16]}.plan"
                self._write(self.folder / name, blob)
                named[str(index)] = (name, digest)
            meta = {
                "format": FORMAT,
                "plans": plans,
                "blobs": named,
                "uids": uids,
                "heuristic_index": heuristic_index,
                "build_seconds": build_seconds,
                "last_used": time.time(),
                "size": sum(len(b) for b in blobs.values()),
            }
            self._write(self._meta(key), json.dumps(meta).encode())
        except OSError as exc:
            self.notes.append(f"plan cache: could not write {key} ({exc})")
            return False
        self.evict()
        return True

    def _write(self, path: Path, data: bytes) -> None:
        """0600, written whole to a temporary created exclusively, and renamed over `path`."""
        atomic_write(path, data, private=True)

    # ---- what is there, and making room -------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """Each entry's key, plans held, bytes and when it was last used, newest first."""
        return self.survey()[0]

    def survey(self) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        """The entries as entries() lists them, and those that cannot be read: each one's key and
        why (a FIFO or a link where its metadata should be, metadata of the wrong shape)."""
        out: list[dict[str, Any]] = []
        unreadable: list[dict[str, str]] = []
        if not self.ready():
            return out, unreadable
        for name in self._names():
            if not name.endswith(".json") or name.startswith("."):
                continue
            key = name[: -len(".json")]
            try:
                entry = entry_from(key, self._read_meta(name))
            except (OSError, BadEntry) as exc:
                unreadable.append(dict(key=key, why=_words(exc)))
                continue
            names = [p["name"] if isinstance(p.get("name"), str) else "" for p in entry.plans]
            out.append(
                dict(key=key, plans=len(entry.blobs), size=entry.size, last_used=entry.last_used, names=names)
            )
        return sorted(out, key=lambda e: e["last_used"], reverse=True), unreadable

    def _names(self) -> list[str]:
        try:
            return sorted(os.listdir(self.folder))
        except OSError as exc:
            self.notes.append(f"plan cache: cannot list {self.folder} ({_words(exc)})")
            return []

    def size(self) -> int:
        return sum(e["size"] for e in self.entries())

    def evict(self) -> int:
        """Remove the least recently used entries until the cache fits its cap; how many went."""
        entries = self.entries()
        total, removed = sum(e["size"] for e in entries), 0
        for e in reversed(entries):
            if total <= self.cap_bytes:
                break
            self.remove(e["key"])
            total -= e["size"]
            removed += 1
        return removed

    def remove(self, key: str) -> None:
        """Unlink the entry's files (a link or a FIFO among them goes as itself, never opened)."""
        for path in [self._meta(key), *self.folder.glob(f"{glob.escape(key)}-*.plan")]:
            with contextlib.suppress(OSError):
                path.unlink()

    def clear(self) -> int:
        """Remove every entry, the unreadable ones too; how many there were."""
        readable, unreadable = self.survey()
        keys = [e["key"] for e in readable + unreadable]
        for key in keys:
            self.remove(key)
        for stray in self.folder.glob("*.plan"):  # blobs whose metadata never got written
            with contextlib.suppress(OSError):
                stray.unlink()
        return len(keys)

    def _drop(self, key: str, why: str) -> None:
        """A bad entry: a miss, said once in the notes, and its files removed."""
        self.notes.append(f"a cached plan was removed and rebuilt: {why}")
        self.remove(key)
        return None


def _words(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


# ---- a graph's plans to and from an entry ----------------------------------------------------
def save(cache: PlanCache, key: str, g: Any, build_seconds: float) -> None:
    """Serialize each built plan of `g` (an SdpaGraph just built) into an entry: selecting a plan
    with build_plan_at_index() makes it the one serialize() writes. The heuristic's pick is
    selected again afterwards, as execute() expects."""
    blobs: dict[int, bytes] = {}
    for plan in g.plans:
        if not plan.built:
            continue
        try:
            g.graph.build_plan_at_index(plan.index)
            blobs[plan.index] = bytes(g.graph.serialize(as_bytes=True))
        except Exception as exc:  # a plan that cannot be serialized is built again next time
            cache.notes.append(f"plan {plan.name} is not cached: {type(exc).__name__}: {exc}")
    g.graph.build_plan_at_index(g.chosen)
    uids = {name: int(t.get_uid()) for name, t in g.tensors.items()}
    plans = [dataclasses.asdict(p) for p in g.plans]
    cache.store(key, plans, blobs, uids, g.heuristic_index, build_seconds)


def restore(cache: PlanCache, key: str, g: Any, handle: Any) -> float | None:
    """Load the entry's plans into `g` (an SdpaGraph defined and validated), each plan into a
    graph of its own; the seconds a build took when the entry was made, or None on a miss."""
    import cudnn

    from ..model.results import PlanResult

    found = cache.load(key)
    if found is None:
        return None
    entry, blobs = found
    loaded = {}
    try:
        for index, blob in blobs.items():
            plan_graph = cudnn.pygraph(handle=handle)
            plan_graph.deserialize(handle, blob)
            loaded[index] = plan_graph
        plans = [PlanResult(**{**p, "behavior_notes": tuple(p["behavior_notes"])}) for p in entry.plans]
    except Exception as exc:
        cache._drop(key, f"cuDNN could not load it ({type(exc).__name__}: {exc})")
        return None
    g.plans, g.loaded, g.uids, g.heuristic_index = plans, loaded, entry.uids, entry.heuristic_index
    g.workspace_bytes = max([int(p.get_workspace_size()) for p in loaded.values()] or [0])
    return entry.build_seconds
