"""The plan cache on disk, on the CPU: what it writes and how, what it refuses to read, a corrupt
blob removed rather than loaded, the size cap, and a graph's plans saved through serialize()."""

import dataclasses
import json
import stat

import pytest

from tui.model.results import Environment, PlanResult
from tui.store import plan_cache
from tui.store.plan_cache import PlanCache, entry_key, fingerprint

PLANS = [
    dataclasses.asdict(PlanResult(index=i, name=f"eng{i}", built=True, build_seconds=0.1)) for i in range(3)
]


def stored(cache, key="k1", blobs=None):
    blobs = blobs or {0: b"plan zero", 2: b"plan two"}
    assert cache.store(key, PLANS, blobs, {"q": 1, "o": 4}, 0, 0.44)
    return blobs


def test_an_entry_reads_back_its_plans_blobs_and_uids(tmp_path):
    cache = PlanCache(tmp_path / "plans")
    blobs = stored(cache)
    entry, got = cache.load("k1")
    assert got == blobs and entry.uids == {"q": 1, "o": 4} and entry.heuristic_index == 0
    assert [p["name"] for p in entry.plans] == ["eng0", "eng1", "eng2"] and entry.build_seconds == 0.44
    assert cache.load("another") is None and cache.notes == []


def test_files_are_private_and_the_folder_is_ours(tmp_path):
    cache = PlanCache(tmp_path / "plans")
    stored(cache)
    assert stat.S_IMODE((tmp_path / "plans").stat().st_mode) == 0o700
    for path in (tmp_path / "plans").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert not list((tmp_path / "plans").glob(".*tmp"))  # written whole, then renamed


def test_a_folder_others_can_write_is_not_read(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    cache = PlanCache(folder)
    stored(cache)
    folder.chmod(0o777)
    assert cache.load("k1") is None
    assert "writable by others" in cache.notes[-1]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "plans-real", target_is_directory=True)
    (tmp_path / "plans-real").mkdir(mode=0o700)
    assert not PlanCache(link).ready()


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "delete the blob", "garble the metadata"])
def test_a_damaged_entry_is_removed_with_a_note_never_loaded(tmp_path, damage):
    cache = PlanCache(tmp_path)
    stored(cache)
    blob = next(tmp_path.glob("k1-2-*.plan"))
    if damage == "flip a byte":
        data = bytearray(blob.read_bytes())
        data[0] ^= 0xFF
        blob.write_bytes(bytes(data))
    elif damage == "truncate":
        blob.write_bytes(blob.read_bytes()[:3])
    elif damage == "delete the blob":
        blob.unlink()
    else:
        (tmp_path / "k1.json").write_text("{not json")
    assert cache.load("k1") is None
    assert cache.notes and cache.notes[-1].startswith("a cached plan was removed and rebuilt")
    assert not list(tmp_path.glob("k1*"))  # the whole entry went


def test_the_cap_evicts_the_least_recently_used(tmp_path):
    cache = PlanCache(tmp_path, cap_bytes=80)  # three entries of 25 bytes fit, four do not
    for key in ("old", "mid", "new"):
        stored(cache, key, {0: b"x" * 25})
        meta = json.loads((tmp_path / f"{key}.json").read_text())
        meta["last_used"] = {"old": 1.0, "mid": 2.0, "new": 3.0}[key]
        (tmp_path / f"{key}.json").write_text(json.dumps(meta))
    assert cache.load("old") is not None  # used now: the newest
    stored(cache, "newest", {0: b"y" * 25})
    assert {e["key"] for e in cache.entries()} == {"old", "new", "newest"}  # "mid" was used longest ago
    assert cache.size() == 75
    assert cache.clear() == 3 and cache.entries() == [] and not list(tmp_path.glob("*.plan"))


def test_the_key_holds_the_graph_the_pass_the_modes_and_the_machine():
    env = Environment(gpu_available=True, gpu_name="NVIDIA H200", compute_capability="9.0",
                      driver_version="580.1", cudnn_backend_version="9.19.0", frontend_version="1.32.0")  # fmt: skip
    machine = fingerprint(env)
    base = entry_key("{graph}", "forward", ("A", "FALLBACK"), machine)
    assert base == entry_key("{graph}", "forward", ("A", "FALLBACK"), machine)
    others = [
        entry_key("{other graph}", "forward", ("A", "FALLBACK"), machine),
        entry_key("{graph}", "backward", ("A", "FALLBACK"), machine),
        entry_key("{graph}", "forward", ("A",), machine),
        entry_key("{graph}", "forward", ("A", "FALLBACK"), fingerprint(dataclasses.replace(env, cudnn_backend_version="9.26.0"))),
        entry_key("{graph}", "forward", ("A", "FALLBACK"), fingerprint(dataclasses.replace(env, driver_version="590.0"))),
    ]  # fmt: skip
    assert base not in others and len(set(others)) == len(others)


class FakeFrontendGraph:
    """What save() asks of a built graph: select a plan, serialize the selected one."""

    def __init__(self, refuse=()):
        self.selected, self.refuse = None, refuse

    def build_plan_at_index(self, index):
        self.selected = index

    def serialize(self, as_bytes=False):
        if self.selected in self.refuse:
            raise RuntimeError("this plan cannot be serialized")
        return f"blob of plan {self.selected}".encode()


class FakeTensor:
    def __init__(self, uid):
        self.uid = uid

    def get_uid(self):
        return self.uid


def test_save_serializes_each_built_plan_selected_then_selects_the_pick_again(tmp_path):
    plans = [PlanResult(index=i, name=f"eng{i}", built=i != 1) for i in range(4)]
    g = dataclasses.make_dataclass("G", ["plans", "graph", "tensors", "heuristic_index", "chosen"])(
        plans, FakeFrontendGraph(refuse=(3,)), {"q": FakeTensor(1), "o": FakeTensor(4)}, 2, 2
    )
    cache = PlanCache(tmp_path)
    plan_cache.save(cache, "key", g, 0.5)
    entry, blobs = cache.load("key")
    assert blobs == {0: b"blob of plan 0", 2: b"blob of plan 2"}  # 1 never built; 3 refused
    assert g.graph.selected == 2 and entry.uids == {"q": 1, "o": 4}
    assert any("eng3 is not cached" in note for note in cache.notes)


def test_a_write_that_fails_is_a_note_not_an_error(tmp_path):
    cache = PlanCache(tmp_path / "plans")
    (tmp_path / "plans" / "k.json").mkdir(parents=True)  # nothing can be renamed over a folder
    (tmp_path / "plans" / "k.json" / "in the way").write_text("")
    assert cache.store("k", PLANS, {0: b"x"}, {}, 0, 0.1) is False
    assert "could not write k" in cache.notes[-1] and cache.load("k") is None


def test_the_cache_command_lists_and_clears_the_entries(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tui.cli.main import main

    monkeypatch.setenv("SDPA_EXPLORER_CACHE_DIR", str(tmp_path))
    cache = PlanCache()
    stored(cache, "a" * 40)
    stored(cache, "b" * 40, {0: b"z" * 1000})
    result = CliRunner().invoke(main, ["cache"])
    assert result.exit_code == 0, result.output
    assert "2 graph(s), 3 plan(s)" in result.output and "eng0, eng1, eng2" in result.output
    data = json.loads(CliRunner().invoke(main, ["cache", "--json"]).output)
    assert data["entries"] == 2 and data["bytes"] == 17 + 1000 and data["folder"] == str(tmp_path)
    result = CliRunner().invoke(main, ["cache", "--clear"])
    assert "removed 2 cached graph(s)" in result.output and PlanCache().entries() == []


def test_check_counts_the_graphs_loaded_and_built():
    from fakes import RECORDED

    from tui.jobs.check import plan_cache_counts
    from tui.model.results import PhaseTiming

    loaded_phases = (*RECORDED.forward.phases[:2], PhaseTiming("load_plans", 0.004, "loaded"))
    loaded = dataclasses.replace(
        RECORDED, passes=(dataclasses.replace(RECORDED.forward, phases=loaded_phases),)
    )
    counts = plan_cache_counts([RECORDED, loaded, loaded])
    assert counts["built"] == 1 and counts["loaded"] == 2
    assert counts["loaded_seconds"] == pytest.approx(0.008)
    assert counts["built_seconds"] == pytest.approx(sum(p.seconds for p in RECORDED.forward.phases[2:]))


# ---- what the cache refuses to write through or read -------------------------------------------
def test_a_link_placed_at_a_temporary_name_is_never_written_through(tmp_path):
    """The writer's temporary is created exclusively under a name no one can guess: a hard link
    placed where the old writer put it (`.NAME.PID.tmp`) is left as it was."""
    import os

    folder = tmp_path / "plans"
    PlanCache(folder).ready()
    victim = tmp_path / "victim"
    victim.write_text("theirs")
    os.link(victim, folder / f".k1.json.{os.getpid()}.tmp")
    stored(PlanCache(folder))
    assert victim.read_text() == "theirs"
    assert PlanCache(folder).load("k1") is not None


def test_a_blob_that_is_a_link_out_of_the_folder_is_not_followed(tmp_path):
    cache = PlanCache(tmp_path / "plans")
    stored(cache)
    blob = next((tmp_path / "plans").glob("k1-2-*.plan"))
    outside = tmp_path / "outside.plan"
    outside.write_bytes(blob.read_bytes())  # the very bytes: the hash alone would pass it
    blob.unlink()
    blob.symlink_to(outside)
    assert cache.load("k1") is None
    assert "is a link, not a regular file" in cache.notes[-1]
    assert outside.read_bytes() == b"plan two" and not blob.is_symlink()


@pytest.mark.parametrize("where", ["metadata", "blob"])
def test_a_file_over_its_size_bound_is_not_read(tmp_path, monkeypatch, where):
    cache = PlanCache(tmp_path)
    stored(cache, blobs={0: b"x", 2: b"y" * 9})
    monkeypatch.setattr(plan_cache, "META_MAX_BYTES" if where == "metadata" else "BLOB_MAX_BYTES", 8)
    assert cache.load("k1") is None and "larger than 8 bytes" in cache.notes[-1]


FIFO_IN_THE_CACHE = """
import json, os, sys
from click.testing import CliRunner
from tui.cli.main import main
from tui.store.plan_cache import PlanCache
os.mkfifo(os.path.join(os.environ["SDPA_EXPLORER_CACHE_DIR"], "fifo.json"))
assert PlanCache().store("k1", [], {0: b"plan"}, {}, 0, 0.1)  # evict() lists the folder
listed = CliRunner().invoke(main, ["cache", "--json"])
shown = CliRunner().invoke(main, ["cache"])
cleared = CliRunner().invoke(main, ["cache", "--clear"])
print(json.dumps([listed.output, shown.output, cleared.output, os.listdir(os.environ["SDPA_EXPLORER_CACHE_DIR"])]))
"""


def test_a_fifo_in_the_folder_hangs_nothing(tmp_path):
    """A FIFO named like an entry is listed as unreadable, never opened; --clear removes it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path / "plans"
    PlanCache(folder).ready()
    env = {**os.environ, "SDPA_EXPLORER_CACHE_DIR": str(folder),
           "PYTHONPATH": str(Path(plan_cache.__file__).parents[2])}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", FIFO_IN_THE_CACHE], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed, shown, cleared, left = json.loads(done.stdout)
    assert json.loads(listed)["unreadable"] == [
        {"key": "fifo", "why": "fifo.json is a FIFO, not a regular file"}
    ]
    assert "unreadable: fifo.json (fifo.json is a FIFO, not a regular file)" in shown
    assert "1 graph(s), 1 plan(s)" in shown and "Traceback" not in shown
    assert "removed 2 cached graph(s)" in cleared and left == []


WRONG_SHAPES = {
    "a list": [],
    "null": None,
    "a number": 7,
    "deep nesting": "[" * 100_000 + "]" * 100_000,
    "blobs a list": {"blobs": [["k1-0-x.plan", "0" * 64]]},
    "an integer blob name": {"blobs": {"0": [5, "0" * 64]}},
    "a blob out of the folder": {"blobs": {"0": ["../k1-0-x.plan", "0" * 64]}},
    "a blob index not a number": {"blobs": {"zero": ["k1-0-x.plan", "0" * 64]}},
    "plans not objects": {"plans": [1, 2]},
    "uids a list": {"uids": [1]},
    "size a string of digits": {"size": "9" * 5000},
    "a size no blobs could have": {"size": 10**400},
    "last_used a string": {"last_used": "yesterday"},
    "last_used too large for a float": {"last_used": 10**400},
    "last_used not finite": {"last_used": float("nan")},
    "no format": {"format": None},
}


@pytest.mark.parametrize("shape", WRONG_SHAPES)
def test_metadata_of_the_wrong_shape_is_a_miss_said_once_and_listed_as_unreadable(
    tmp_path, monkeypatch, shape
):
    from click.testing import CliRunner

    from tui.cli.main import main

    monkeypatch.setenv("SDPA_EXPLORER_CACHE_DIR", str(tmp_path))
    cache = PlanCache()
    stored(cache)
    meta = json.loads((tmp_path / "k1.json").read_text())
    wrong = WRONG_SHAPES[shape]
    text = (
        wrong
        if isinstance(wrong, str)
        else json.dumps({**meta, **wrong} if isinstance(wrong, dict) else wrong)
    )
    (tmp_path / "k1.json").write_text(text)
    assert cache.entries() == []
    result = CliRunner().invoke(main, ["cache"])
    assert result.exit_code == 0 and "Traceback" not in result.output and result.exception is None
    assert "unreadable: k1.json (" in result.output
    assert cache.load("k1") is None
    assert len(cache.notes) == 1 and cache.notes[0].startswith("a cached plan was removed and rebuilt")
    assert not list(tmp_path.glob("k1*"))  # the whole entry went: the next build writes it again
