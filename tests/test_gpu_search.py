"""Pinned plans and the knob search on the H200: a pin runs in the heuristic's place and is compared
with it, a pin cuDNN cannot make is said and the pick runs, the plan cache keeps the pin; a search
builds, checks and times candidates beyond the heuristic's list, and a cancel keeps what it found."""

import subprocess
import sys

import pytest

from tui.engine.knob_trials import PLACEMENT_PADS_MIB
from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig
from tui.model.knob_search import BUILD_FAILED, HEURISTIC, SEARCHED
from tui.model.pins import Pin
from tui.model.search_results import SearchOptions
from tui.present.export import script
from tui.process.session import EngineSession

pytestmark = pytest.mark.gpu

DECODE = SdpaConfig(
    b=4, h_q=32, h_kv=8, s_q=1, s_kv=4096, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"
)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SDPA_EXPLORER_CACHE_DIR", str(tmp_path))
    return tmp_path


def other_plan(engine: Engine) -> Pin:
    """A built plan of the heuristic's list other than its pick, as a pin."""
    r = engine.run(DECODE, RunOptions(plan_cache=False))
    assert r.status == "ok", r.message
    other = next(p for p in r.forward.plans if p.built and not p.is_heuristic_pick)
    return Pin.of(other.engine_id, other.knobs)


def test_a_pinned_plan_runs_in_the_picks_place_and_is_compared_with_it(folder):
    engine = Engine()
    pin = other_plan(engine)
    r = engine.run(DECODE.replace(plan=pin.text()), RunOptions(autotune=False))
    assert r.status == "ok", r.message
    f = r.forward
    pinned = f.plan(f.pinned_plan)
    assert pinned is not None and pinned.is_pinned and pinned.index == len(f.plans) - 1
    assert Pin.of(pinned.engine_id, pinned.knobs) == pin
    assert f.timing == pinned.timing and f.plan(f.heuristic_plan).timing is not None  # both timed
    assert f.passed and pinned.matches is not False
    assert any(n.startswith(f"pinned plan {pin.text()} ran under cuDNN") for n in f.notes), f.notes
    # a second engine loads the pin from the plan cache and runs it again
    again = Engine().run(DECODE.replace(plan=pin.text()), RunOptions(autotune=False))
    assert again.forward.phases[-1].name == "load_plans" and again.forward.pinned_plan == f.pinned_plan


def test_a_pin_cudnn_cannot_make_is_said_and_the_pick_runs(folder):
    r = Engine().run(DECODE.replace(plan="1 KERNEL_CFG=100000"), RunOptions(autotune=False))
    assert r.status == "ok", r.message
    assert r.forward.pinned_plan is None and r.forward.timing is not None
    assert any("does not build under cuDNN" in n and "the heuristic's pick ran" in n for n in r.forward.notes)


def test_a_search_builds_checks_and_times_candidates_beyond_the_list(folder):
    r = Engine().search(DECODE, SearchOptions(budget_s=20.0, peers=("flash",)))
    assert r.status == "ok", r.message
    heuristic = [t for t in r.trials if t.origin == HEURISTIC]
    searched = r.searched()
    assert heuristic and searched and r.spaces
    assert r.spaces[0].engine_id == heuristic[0].pin.engine_id  # the pick's engine is searched first
    assert any(t.status == BUILD_FAILED for t in searched) or r.counts()["built"] == len(searched)
    assert all(t.max_abs_error is not None for t in searched if t.passed)
    assert r.pick is not None and r.pick.plan == r.pick_plan and r.best is not None
    assert r.best.median_us <= r.pick.median_us * 1.02  # the pick is among the candidates
    assert {t.plan for t in r.confirmed} >= {r.pick_plan}
    # each confirmed plan timed with the inputs at the same places in memory (the run's, then copies)
    places = {len(t.placements_us) for t in r.confirmed}
    assert places == {len(PLACEMENT_PADS_MIB) + 1}, places
    assert all(min(t.placements_us) > 0 for t in r.confirmed)
    assert r.best.plan == r.pick_plan or r.gain_range() is not None
    assert r.best_peer is not None and r.best_peer.name.startswith("torch FLASH")
    assert r.elapsed_s < 20.0 + 60.0  # the budget bounds the search; the run and confirmation add to it


def test_a_search_in_the_engine_process_stops_when_asked_and_keeps_what_it_found():
    with EngineSession() as session:
        assert session.ready() is not None
        seen: list[str] = []

        def watch(text: str) -> None:
            seen.append(text)
            if sum(t.startswith("searching: candidate") for t in seen) == 3:
                session.client.cancel()

        r = session.search(DECODE, SearchOptions(budget_s=120.0, peers=()), watch=watch)
    assert r.status == "cancelled", r.message
    assert sum(t.origin == SEARCHED for t in r.trials) >= 2  # engines probed, then candidates


def test_after_a_search_its_process_retires_and_the_contender_runs_pinned_in_a_fresh_one(folder):
    """The search's engine process exits after answering (EXIT_RETIRED) and the next request runs in
    a fresh one, with no restart reported; the session then runs the contender (the best found, or
    the runner-up where the confirmation put the pick first), pinned, there, beside the pick."""
    with EngineSession() as session:
        assert session.ready() is not None
        first = session.client.pid
        r = session.search(DECODE, SearchOptions(budget_s=20.0, peers=()))
        assert r.status == "ok", r.message
        assert r.contender is not None and r.contender.plan != r.pick_plan  # 18 plans build for decode
        assert r.fresh is not None and r.fresh.plan == r.contender.plan and not r.fresh.message, r.fresh
        assert r.fresh.pick_us and r.fresh.best_us  # both timed in the fresh process
        assert session.client.pid != first and session.restarts == 0  # a fresh process, quietly


def test_the_exported_script_rebuilds_the_pinned_plan_and_agrees(folder, tmp_path):
    from exported import assert_script_agrees

    engine = Engine()
    pinned = DECODE.replace(plan=other_plan(engine).text())
    result = engine.run(pinned)
    assert result.status == "ok" and result.forward.pinned_plan is not None, result.message
    figures = assert_script_agrees(tmp_path, result)
    assert figures["passed"]


def test_an_exported_script_whose_pin_this_cudnn_lacks_says_so(tmp_path):
    path = tmp_path / "repro.py"
    path.write_text(script(DECODE.replace(plan="1 KERNEL_CFG=100000")))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "pinned plan 1 KERNEL_CFG=100000 is not in cuDNN" in proc.stderr
