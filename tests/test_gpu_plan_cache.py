"""The plan cache on the H200: a second engine loads every plan a first one built, runs them to the
same output bits and times them; a corrupt blob is removed, rebuilt and said in a note."""

import pytest
import torch

from tui.engine import graph as graphmod
from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig
from tui.store.plan_cache import PlanCache

pytestmark = pytest.mark.gpu

TRAIN = SdpaConfig(b=2, h_q=8, h_kv=2, s_q=512, s_kv=512, d_qk=64, d_v=64, dtype="bf16", backward=True)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SDPA_EXPLORER_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_second_engine_loads_every_plan_and_runs_them_to_the_same_bits(folder):
    built = Engine()
    first = built.run(TRAIN)
    assert first.status == "ok", first.message
    assert [p.name for p in first.forward.phases] == list(graphmod.BUILD_PHASES)
    assert len(PlanCache(folder).entries()) == 2  # the forward's graph and the backward's
    again = Engine()
    second = again.run(TRAIN)
    assert second.status == "ok", second.message
    for before, after in zip(first.passes, second.passes, strict=True):
        assert [p.name for p in after.phases] == list(graphmod.LOADED_PHASES), after.kind
        assert "building them took" in after.phases[-1].note
        assert [p.name for p in after.plans] == [p.name for p in before.plans]
        assert all(p.timing is not None for p in after.plans if p.built), after.kind
        assert after.heuristic_plan == before.heuristic_plan and after.passed
    # the forward's O was last written by the heuristic's pick (before the backward read it): the
    # loaded plan writes the bits the built one did (the backward's atomics need not)
    assert torch.equal(built.output(TRAIN, "o"), again.output(TRAIN, "o"))


def test_a_corrupt_blob_is_removed_rebuilt_and_said(folder):
    config = TRAIN.replace(backward=False, s_q=256, s_kv=256)
    assert Engine().run(config, RunOptions(autotune=False)).status == "ok"
    blob = next(folder.glob("*.plan"))
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    r = Engine().run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    assert [p.name for p in r.forward.phases] == list(graphmod.BUILD_PHASES)
    assert any("removed and rebuilt" in note for note in r.forward.notes), r.forward.notes
    r = Engine().run(config, RunOptions(autotune=False))  # the rebuilt entry is whole again
    assert [p.name for p in r.forward.phases] == list(graphmod.LOADED_PHASES)


def test_no_cache_builds_afresh_in_a_process_that_holds_the_graph(folder):
    """--no-cache builds every plan, even where this process holds the configuration's graph
    already (loaded from the plan cache by an earlier run): nothing built before is reused."""
    config = TRAIN.replace(backward=False, s_q=256, s_kv=256, h_q=4, h_kv=4)
    assert Engine().run(config, RunOptions(autotune=False)).status == "ok"  # fills the plan cache
    engine = Engine()
    loaded = engine.run(config, RunOptions(autotune=False))
    assert [p.name for p in loaded.forward.phases] == list(graphmod.LOADED_PHASES)
    assert engine.run(config, RunOptions(autotune=False)).cache_hit  # the graph held in memory
    fresh = engine.run(config, RunOptions(autotune=False, plan_cache=False))
    assert fresh.status == "ok", fresh.message
    assert not fresh.cache_hit
    assert [p.name for p in fresh.forward.phases] == list(graphmod.BUILD_PHASES)
