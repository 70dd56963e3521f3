"""Compiled plans kept on disk across launches, so a graph built once loads in milliseconds.

An entry is one graph on one machine: the key hashes the graph's JSON, the pass, the heuristic
modes and the GPU, driver, cuDNN and frontend versions, so an upgrade never loads a stale plan.
It holds each built plan's serialized blob (the frontend's serialize() of that plan selected)
and what the run reports of the plans without building them again.

The blobs are native code that cuDNN loads, so the cache trusts only what it wrote: it reads a
folder it created itself (owned by this user, writable by no one else), writes every file 0600,
and checks each blob's SHA-256 before handing it over. A blob that fails that check, or that
cuDNN will not load, removes its entry; the graph is then built as if never cached, with a note.
Entries past the size cap go least recently used first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from .private import FolderRefused, private_folder

DEFAULT_CAP_BYTES = 512 << 20  # ~5,000 plans of 70-100 KB (H200: 70-96 KB each)
ENV_FOLDER = "SDPA_EXPLORER_CACHE_DIR"  # where the cache lives instead of the user cache folder
FORMAT = 1  # of an entry's metadata; another format is a miss, never an error


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


def default_folder() -> Path:
    if os.environ.get(ENV_FOLDER):
        return Path(os.environ[ENV_FOLDER])
    import platformdirs

    return Path(platformdirs.user_cache_dir("sdpa-explorer")) / "plans"


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


class PlanCache:
    """The folder of entries. Every method says what went wrong in `notes` rather than raising:
    a cache is never a reason for a run to fail."""

    def __init__(self, folder: Path | None = None, cap_bytes: int = DEFAULT_CAP_BYTES):
        self.folder = Path(folder) if folder is not None else default_folder()
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
        path = self._meta(key)
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            return self._drop(key, f"its metadata cannot be read ({exc})")
        if meta.get("format") != FORMAT:
            return self._drop(key, "it was written in another format")
        try:
            entry = Entry(
                key=key,
                plans=meta["plans"],
                blobs={int(i): (name, digest) for i, (name, digest) in meta["blobs"].items()},
                uids={str(n): int(u) for n, u in meta["uids"].items()},
                heuristic_index=meta["heuristic_index"],
                build_seconds=float(meta["build_seconds"]),
                last_used=float(meta["last_used"]),
                size=int(meta["size"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            return self._drop(key, f"its metadata is incomplete ({exc})")
        blobs = {}
        for index, (name, digest) in entry.blobs.items():
            try:
                blob = (self.folder / Path(name).name).read_bytes()
            except OSError as exc:
                return self._drop(key, f"plan {index}'s blob cannot be read ({exc})")
            if hashlib.sha256(blob).hexdigest() != digest:
                return self._drop(key, f"plan {index}'s blob does not match its hash")
            blobs[index] = blob
        self._touch(path, meta)
        return entry, blobs

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
        """0600, written whole to a temporary name and renamed over `path`."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise

    # ---- what is there, and making room -------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """Each entry's key, plans held, bytes and when it was last used, newest first."""
        out = []
        if not self.ready():
            return out
        for path in self.folder.glob("*.json"):
            try:
                meta = json.loads(path.read_text(encoding="utf-8"))
                names = [p.get("name", "") for p in meta.get("plans", [])]
                out.append(
                    dict(key=path.stem, plans=len(meta["blobs"]), size=int(meta["size"]),
                         last_used=float(meta["last_used"]), names=names)
                )  # fmt: skip
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sorted(out, key=lambda e: e["last_used"], reverse=True)

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
        for path in [self._meta(key), *self.folder.glob(f"{key}-*.plan")]:
            with contextlib.suppress(OSError):
                path.unlink()

    def clear(self) -> int:
        """Remove every entry; how many there were."""
        keys = [e["key"] for e in self.entries()]
        for key in keys:
            self.remove(key)
        for stray in self.folder.glob("*.plan"):  # blobs whose metadata never got written
            with contextlib.suppress(OSError):
                stray.unlink()
        return len(keys)

    def _drop(self, key: str, why: str) -> None:
        self.notes.append(f"a cached plan was removed and rebuilt: {why}")
        self.remove(key)
        return None


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
