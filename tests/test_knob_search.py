"""The knob search's strategy against a fake engine: small spaces tried whole, large ones drawn
and refined around the best, the budget kept, a wrong plan never the winner, a cancel keeping
what was found; and the search's record through JSON and CSV."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tui.model.config import SdpaConfig
from tui.model.knob_search import (
    BUILD_FAILED,
    BUILT,
    CHECK_FAILED,
    EXHAUSTIVE_MAX,
    HEURISTIC,
    STOP_BUDGET,
    STOP_SPACE,
    Budget,
    EngineSpace,
    KnobAxis,
    Trial,
    fastest,
    search,
)
from tui.model.pins import Pin
from tui.model.results import PeerResult, TimingStats
from tui.model.search_results import FreshRun, SearchOptions, SearchResult, fresh_config, with_fresh
from tui.present.format import fresh_words


class FakeEngine:
    """Builds a candidate when `builds` says so, times it by `cost`, and spends `seconds` of a
    fake clock on each: what the GPU side does, without a GPU."""

    def __init__(self, cost, builds=lambda pin: True, wrong=lambda pin: False, seconds=1.0):
        self.cost, self.builds, self.wrong, self.seconds = cost, builds, wrong, seconds
        self.now = 0.0
        self.tried: list[Pin] = []

    def clock(self) -> float:
        return self.now

    def try_plan(self, pin: Pin) -> Trial:
        self.tried.append(pin)
        self.now += self.seconds
        if not self.builds(pin):
            return Trial(pin.text(), BUILD_FAILED, error="CUDNN_STATUS_NOT_SUPPORTED")
        status = CHECK_FAILED if self.wrong(pin) else BUILT
        return Trial(
            pin.text(), status, median_us=self.cost(pin), max_abs_error=1.0 if self.wrong(pin) else 1e-3
        )


def cfg(pin: Pin) -> int:
    return pin.knob_dict().get("KERNEL_CFG", 0)


def test_an_axis_counts_its_values_by_stride():
    axis = KnobAxis("SPLIT_KV", 2, 10, 4)
    assert axis.count == 3 and [axis.value(i) for i in range(3)] == [2, 6, 10]
    assert axis.position(6) == 1 and axis.position(7) is None and axis.position(14) is None


def test_a_small_space_is_tried_whole_and_the_search_ends_there():
    space = EngineSpace(1, (KnobAxis("KERNEL_CFG", 0, 63),))
    fake = FakeEngine(cost=lambda p: 200 - cfg(p), builds=lambda p: cfg(p) % 3 == 0)
    trials, stopped = search([space], fake.try_plan, Budget(1e9, fake.clock))
    assert stopped == STOP_SPACE and len(trials) == 64 == len(set(fake.tried))
    assert sum(t.status == BUILD_FAILED for t in trials) == 42
    assert fastest(trials).plan == "1 KERNEL_CFG=63"


def test_the_budget_is_kept_no_candidate_starts_after_it():
    space = EngineSpace(1, (KnobAxis("KERNEL_CFG", 0, 63),))
    fake = FakeEngine(cost=lambda p: 100.0, seconds=2.5)
    trials, stopped = search([space], fake.try_plan, Budget(10.0, fake.clock))
    assert stopped == STOP_BUDGET and len(trials) == 4  # started at 0, 2.5, 5 and 7.5 s


def test_known_plans_are_not_tried_again_and_seed_the_refinement():
    space = EngineSpace(1, (KnobAxis("A", 0, 999), KnobAxis("B", 0, 999)))
    assert not space.exhaustive and space.size > EXHAUSTIVE_MAX
    pick = Trial("1 A=500 B=500", BUILT, HEURISTIC, median_us=1000.0)
    fake = FakeEngine(cost=lambda p: 1000.0 - abs(p.knob_dict()["A"] - 500) - abs(p.knob_dict()["B"] - 500))
    trials, _ = search([space], fake.try_plan, Budget(4.0, fake.clock), known=(pick,))
    assert Pin.of(1, {"A": 500, "B": 500}) not in fake.tried
    assert fake.tried[0] in space.neighbours(pick.pin)  # the pick's neighbours come before any draw
    assert all(abs(p.knob_dict()["A"] - 500) + abs(p.knob_dict()["B"] - 500) <= 4 for p in fake.tried)


def test_a_large_space_is_refined_around_each_new_best_to_the_optimum():
    """Random draws find the slope; one-step moves around each new best climb it."""
    axes = (KnobAxis("A", 0, 199), KnobAxis("B", 0, 199))
    space = EngineSpace(3, axes)
    fake = FakeEngine(cost=lambda p: 50.0 + abs(p.knob_dict()["A"] - 140) + abs(p.knob_dict()["B"] - 30))
    trials, stopped = search([space], fake.try_plan, Budget(1500.0, fake.clock), seed=4)
    assert stopped == STOP_BUDGET and len(trials) == 1500
    assert fastest(trials).plan == "3 A=140 B=30" and fastest(trials).median_us == 50.0


def test_a_faster_wrong_plan_is_never_the_winner():
    space = EngineSpace(1, (KnobAxis("KERNEL_CFG", 0, 9),))
    fake = FakeEngine(cost=lambda p: 100.0 - cfg(p), wrong=lambda p: cfg(p) == 9)
    trials, _ = search([space], fake.try_plan, Budget(1e9, fake.clock))
    assert fastest(trials).plan == "1 KERNEL_CFG=8"
    assert next(t for t in trials if t.plan == "1 KERNEL_CFG=9").status == CHECK_FAILED


def test_engines_are_searched_in_turn_within_one_budget():
    spaces = [EngineSpace(e, (KnobAxis("A", 0, 10_000),)) for e in (1, 2, 8)]
    fake = FakeEngine(cost=lambda p: 100.0 + p.engine_id)
    search(spaces, fake.try_plan, Budget(30.0, fake.clock), seed=1)
    assert {p.engine_id for p in fake.tried} == {1, 2, 8}


def test_progress_names_each_candidate_and_a_cancel_stops_before_the_next():
    class Stop(BaseException):
        pass

    said: list[str] = []

    def progress(text: str) -> None:
        said.append(text)
        if len(said) == 3:
            raise Stop

    fake = FakeEngine(cost=lambda p: 100.0 - cfg(p))
    with pytest.raises(Stop):
        search(
            [EngineSpace(1, (KnobAxis("KERNEL_CFG", 0, 63),))],
            fake.try_plan,
            Budget(1e9, fake.clock),
            progress=progress,
        )
    assert len(fake.tried) == 2 and said[0].startswith("searching: candidate 1, 1 KERNEL_CFG=0")
    assert "best 99.00 µs (1 KERNEL_CFG=1)" in said[2]


def test_a_space_round_trips_and_its_size_is_the_product():
    space = EngineSpace(1, (KnobAxis("KERNEL_CFG", 0, 63), KnobAxis("SPLIT_KV", 1, 8, 1)))
    assert space.size == 512 and not space.exhaustive
    assert EngineSpace.from_dict(json.loads(json.dumps(space.to_dict()))) == space
    assert len(list(EngineSpace(2, (KnobAxis("X", 0, 2), KnobAxis("Y", 0, 1))).every())) == 6
    assert list(EngineSpace(5).every()) == [Pin(5)]


def stats(us: float) -> TimingStats:
    return TimingStats(median_us=us, min_us=us, max_us=us, p10_us=us, p90_us=us, stdev_us=0.0, replays=20,
                       per_replay=10, l2_flushed=False)  # fmt: skip


def recorded() -> SearchResult:
    trials = (
        Trial("1 KERNEL_CFG=3", BUILT, HEURISTIC, "eng1_k24=3", 165.0, 164.0, 166.0, 2e-4),
        Trial("1", BUILT, HEURISTIC, "eng1", 165.5, 165.0, 166.0, 2e-4),
        Trial("1 KERNEL_CFG=27", BUILT, "searched", "eng1_k24=27", 146.0, 145.5, 147.0, 2.4e-4),
        Trial("1 KERNEL_CFG=30", CHECK_FAILED, "searched", "eng1_k24=30", 120.0, 119.0, 121.0, 0.5),
        Trial("1 KERNEL_CFG=40", BUILD_FAILED, "searched", error="not supported"),
    )
    confirmed = (
        Trial("1 KERNEL_CFG=3", BUILT, HEURISTIC, "eng1_k24=3", 164.8, 164.0, 166.0, 2e-4),
        Trial("1 KERNEL_CFG=27", BUILT, "searched", "eng1_k24=27", 146.2, 145.5, 147.0, 2.4e-4),
    )
    peers = (PeerResult("torch FLASH", timing=stats(126.0)), PeerResult("Flex", reason="not installed"))
    return SearchResult(SdpaConfig(s_q=1, s_kv=8192), "ok", budget_s=60.0, elapsed_s=41.0, stopped=STOP_SPACE,
                        pick_plan="1 KERNEL_CFG=3", spaces=(EngineSpace(1, (KnobAxis("KERNEL_CFG", 0, 63),)),),
                        trials=trials, confirmed=confirmed, peers=peers, preset="llama3-8b-decode")  # fmt: skip


def test_the_record_names_the_pick_the_best_the_gain_and_the_counts():
    r = recorded()
    assert r.pick.median_us == 164.8 and r.best.plan == "1 KERNEL_CFG=27" and r.best.median_us == 146.2
    assert r.gain_pct == pytest.approx((164.8 - 146.2) / 164.8 * 100)
    assert r.best_peer.name == "torch FLASH"
    assert r.counts() == {
        "tried": 3,
        "built": 2,
        "build failed": 1,
        "check failed": 1,
        "crashed": 0,
        "passed": 1,
    }
    assert [t.plan for t in r.faster_but_wrong()] == ["1 KERNEL_CFG=30"]


def test_the_record_round_trips_through_json_and_writes_csv_rows():
    r = recorded()
    again = SearchResult.from_dict(json.loads(r.to_json()))
    assert again == r
    rows = r.csv_rows()
    assert len(rows) == 5 and rows[2]["plan"] == "1 KERNEL_CFG=27" and rows[2]["preset"] == "llama3-8b-decode"


def test_options_round_trip():
    o = SearchOptions(budget_s=30.0, peers=("flash",), seed=3, confirm=2)
    assert SearchOptions.from_dict(json.loads(json.dumps(o.to_dict()))) == o


# ---- a candidate that crashes the engine process: the search goes on in a fresh one ---------------
def test_a_lost_context_resumes_with_what_was_found_and_the_crash_marked():
    from tui.model.knob_search import CRASHED
    from tui.model.search_results import after_crash

    found = recorded().trials + (Trial("1 KERNEL_CFG=19", CRASHED, error="an illegal memory access"),)
    crashed = dataclasses.replace(recorded(), status="crash", message="crashed the GPU", trials=found)
    going_on = after_crash(SearchOptions(budget_s=60.0), crashed, "", 12.5)
    assert going_on.spent_s == 12.5 and going_on.crashes == ("1 KERNEL_CFG=19: an illegal memory access",)
    assert [t.plan for t in going_on.resume] == [
        "1 KERNEL_CFG=27",
        "1 KERNEL_CFG=30",
        "1 KERNEL_CFG=40",
        "1 KERNEL_CFG=19",
    ]
    assert after_crash(SearchOptions(), recorded(), "", 1.0) is None  # it did not crash


def test_a_process_that_died_resumes_without_the_candidate_its_last_words_name():
    from tui.model.search_results import MAX_CRASHES, after_crash

    died = SearchResult(SdpaConfig(), "crash", message="killed by SIGSEGV")
    step = "searching: candidate 7, 5 KERNEL_CFG=2 STAGES=1, 3 of 60 s; best 26.58 µs (2 KERNEL_CFG=7)"
    earlier = (Trial("1 KERNEL_CFG=1", BUILT, median_us=50.0),)
    going_on = after_crash(SearchOptions(resume=earlier, spent_s=3.0), died, step, 4.0)
    assert [t.plan for t in going_on.resume] == ["1 KERNEL_CFG=1", "5 KERNEL_CFG=2 STAGES=1"]
    assert going_on.resume[-1].status == "crashed" and going_on.spent_s == 7.0
    assert after_crash(SearchOptions(), died, "checking the forward", 1.0) is None  # no candidate named
    enough = SearchOptions(crashes=("x",) * MAX_CRASHES)
    assert after_crash(enough, died, step, 1.0) is None


def test_the_session_goes_on_in_a_fresh_process_after_a_crash():
    from tui.process.client import EngineDied, EngineProgress, EngineReady, EngineResult, EngineSearched
    from tui.process.session import EngineSession

    class CrashingOnce:
        """The first search dies under a candidate; the next is answered with what it resumed."""

        def __init__(self):
            self.asked: list[SearchOptions] = []

        def start(self, on_event):
            self.on_event = on_event

        def search(self, config, options):
            self.asked.append(options)
            rid = len(self.asked)
            if rid == 1:
                self.on_event(EngineProgress(rid, "searching: candidate 3, 1 KERNEL_CFG=19, 2 of 60 s"))
                self.on_event(EngineDied("killed by signal 11", rid, crashed=True))
                self.on_event(EngineReady(recorded().environment or _no_gpu(), 1.0))
            else:
                answer = dataclasses.replace(recorded(), config=config, crashes=options.crashes)
                self.on_event(EngineSearched(rid, answer))
            return rid

        def submit(self, config, options):
            self.fresh = config
            self.on_event(EngineResult(9, fresh_run(config)))
            return 9

        def close(self):
            pass

    client = CrashingOnce()
    said: list[str] = []
    with EngineSession(client) as session:
        r = session.search(SdpaConfig(), SearchOptions(budget_s=60.0), watch=said.append)
    assert r.status == "ok" and len(client.asked) == 2
    assert [t.plan for t in client.asked[1].resume] == ["1 KERNEL_CFG=19"]
    assert r.crashes == (
        "1 KERNEL_CFG=19: killed by signal 11 (searching: candidate 3, 1 KERNEL_CFG=19, 2 of 60 s)",
    )
    assert any("going on in a fresh one" in s for s in said)
    # then the best, pinned, beside the pick in the fresh process that follows the search's
    assert client.fresh == SdpaConfig().replace(plan="1 KERNEL_CFG=27")
    assert r.fresh == FreshRun("1 KERNEL_CFG=27", 163.5, 155.0) and r.fresh.gain_pct == pytest.approx(
        5.2, abs=0.05
    )
    assert "running 1 KERNEL_CFG=27 beside the pick in a fresh engine process" in said


def _no_gpu():
    from tui.model.results import Environment

    return Environment(gpu_available=False, unavailable_reason="test")


def test_ctrl_c_stops_the_search_at_the_next_candidate_and_keeps_what_it_found():
    from tui.process.client import EngineProgress, EngineSearched
    from tui.process.session import EngineSession

    class Stoppable:
        def start(self, on_event):
            self.on_event = on_event

        def search(self, config, options):
            self.on_event(EngineProgress(1, "searching: candidate 4, 1 KERNEL_CFG=27, 5 of 60 s"))
            return 1

        def cancel(self):
            found = dataclasses.replace(recorded(), status="cancelled", stopped="cancelled")
            self.on_event(EngineSearched(1, found))

        def close(self):
            pass

    def ctrl_c(_text):
        raise KeyboardInterrupt

    with EngineSession(Stoppable()) as session:
        r = session.search(SdpaConfig(), SearchOptions(), watch=ctrl_c)
    assert r.status == "cancelled" and len(r.trials) == 5


def fresh_run(config: SdpaConfig):
    """A pinned run's answer, as the H200 read the decode pin in a fresh process beside its pick."""
    from tests.fakes import RECORDED
    from tui.model.results import PlanResult

    forward = RECORDED.passes[0]
    plans = (
        PlanResult(
            0,
            "eng1_k24=3",
            1,
            knobs={"KERNEL_CFG": 3},
            built=True,
            timing=stats(163.5),
            is_heuristic_pick=True,
        ),
        PlanResult(1, "eng1", 1, built=True, timing=stats(163.6)),
        PlanResult(
            2, "eng1_k24=27", 1, knobs={"KERNEL_CFG": 27}, built=True, timing=stats(155.0), is_pinned=True
        ),
    )
    forward = dataclasses.replace(forward, plans=plans, heuristic_plan=0, pinned_plan=2, timing=stats(155.0))
    return dataclasses.replace(RECORDED, config=config, passes=(forward, *RECORDED.passes[1:]))


def test_the_fresh_run_gives_the_pins_and_the_picks_figures_or_says_why_not():
    r = recorded()
    config = fresh_config(r)
    assert config == r.config.replace(plan="1 KERNEL_CFG=27")
    fresh = with_fresh(r, fresh_run(config)).fresh
    assert (fresh.pick_us, fresh.best_us) == (163.5, 155.0)
    from tests.fakes import RECORDED

    unpinned = dataclasses.replace(fresh_run(config), passes=RECORDED.passes)
    assert with_fresh(r, unpinned).fresh.message  # the pin did not run: said, no figure
    assert fresh_config(dataclasses.replace(r, status="cancelled")) is None  # stopped: nothing more runs
    training = dataclasses.replace(r, config=SdpaConfig(backward=True))
    assert fresh_config(training) == SdpaConfig(softmax_out="stats").replace(plan="1 KERNEL_CFG=27")
    again = SearchResult.from_dict(json.loads(with_fresh(r, fresh_run(config)).to_json()))
    assert again.fresh == fresh


def test_where_the_confirmation_puts_the_pick_first_the_runner_up_runs_fresh_and_is_named():
    """As on the H200's second GPU: KERNEL_CFG=27 searched faster, confirmed slower than the pick
    in the search's process; the fresh process is where a pinned run of it is read."""
    r = recorded()
    slower = (
        r.confirmed[0],
        dataclasses.replace(r.confirmed[1], median_us=165.3, p10_us=165.0, p90_us=166.0),
    )
    first = dataclasses.replace(r, confirmed=slower)
    assert first.best.plan == first.pick_plan and first.contender.plan == "1 KERNEL_CFG=27"
    config = fresh_config(first)
    assert config == r.config.replace(plan="1 KERNEL_CFG=27")
    done = with_fresh(first, fresh_run(config))
    assert done.fresh == FreshRun("1 KERNEL_CFG=27", 163.5, 155.0)
    words = fresh_words(done)
    assert "1 KERNEL_CFG=27 155.00 µs, pick 163.50 µs: +5.2%" in words
    assert "(2nd)" in presets_table_text([done]) and "(2nd)" not in presets_table_text(
        [with_fresh(r, fresh_run(config))]
    )
    eng1 = Trial("1", BUILT, HEURISTIC, "eng1", 164.2, 164.0, 165.0, 2e-4)  # the heuristic's other plan
    second = dataclasses.replace(first, confirmed=(*slower, eng1))
    assert second.best.plan == "1" and second.contender.plan == "1 KERNEL_CFG=27"  # not the heuristic's
    only_pick = dataclasses.replace(r, confirmed=r.confirmed[:1], trials=r.trials[:1])
    assert (
        only_pick.contender is None and fresh_config(only_pick) is None
    )  # nothing else passed: nothing runs


def runner_up_faster_fresh() -> SearchResult:
    """The confirmation put the pick first (KERNEL_CFG=27 at 165.3 µs beside its 164.8), and the
    fresh process then ran 27 pinned at 155.0 µs beside the pick's 163.5, as the H200 read them."""
    r = recorded()
    slower = (
        r.confirmed[0],
        dataclasses.replace(r.confirmed[1], median_us=165.3, p10_us=165.0, p90_us=166.0),
    )
    return dataclasses.replace(r, confirmed=slower, fresh=FreshRun("1 KERNEL_CFG=27", 163.5, 155.0))


def test_what_to_pin_is_what_a_fresh_process_ran_faster_else_the_best_found():
    r = recorded()
    assert r.to_pin.plan == "1 KERNEL_CFG=27"  # no fresh run: the best found
    assert dataclasses.replace(r, pick_plan="1 KERNEL_CFG=27").to_pin is None  # the pick is the best
    assert (
        dataclasses.replace(r, fresh=FreshRun("1 KERNEL_CFG=27", 163.5, 155.0)).to_pin.plan
        == "1 KERNEL_CFG=27"
    )
    assert (
        dataclasses.replace(r, fresh=FreshRun("1 KERNEL_CFG=27", 155.0, 163.5)).to_pin is None
    )  # slower fresh
    assert dataclasses.replace(r, fresh=FreshRun("1 KERNEL_CFG=27", message="crashed")).to_pin.plan == (
        "1 KERNEL_CFG=27"  # no fresh figure: the confirmation decides
    )
    up = runner_up_faster_fresh()
    assert up.best.plan == up.pick_plan and up.to_pin.plan == "1 KERNEL_CFG=27"


def presets_table_text(results) -> str:
    from rich.console import Console

    from tui.cli.search import presets_table

    console = Console(width=200, record=True)
    console.print(presets_table(results))
    return console.export_text()


def placed() -> SearchResult:
    """The record confirmed with the inputs at four places in memory, as the H200 measured the
    decode preset's pick and KERNEL_CFG=27 (the best moves with where K and V lie, the pick not)."""
    r = recorded()
    at = {"1 KERNEL_CFG=3": (163.8, 163.8, 164.4, 163.5), "1 KERNEL_CFG=27": (155.3, 151.6, 159.7, 160.0)}
    confirmed = tuple(dataclasses.replace(t, placements_us=at[t.plan]) for t in r.confirmed)
    return dataclasses.replace(r, confirmed=confirmed)


def test_a_plan_confirmed_at_several_places_ranks_by_their_median_and_the_gain_spans_them():
    r = placed()
    assert r.best.time_us == pytest.approx((155.3 + 159.7) / 2)  # the median of four
    assert r.pick.time_us == pytest.approx((163.8 + 163.8) / 2)
    assert r.gain_pct == pytest.approx((163.8 - 157.5) / 163.8 * 100)
    lo, hi = r.gain_range()
    assert lo == pytest.approx((163.5 - 160.0) / 163.5 * 100) and hi == pytest.approx(
        (163.8 - 151.6) / 163.8 * 100
    )
    assert recorded().gain_range() is None  # confirmed at one place: no span to give
    assert dataclasses.replace(r, pick_plan="1 KERNEL_CFG=27").gain_range() is None  # the pick itself


def test_placements_round_trip_and_a_search_file_without_them_still_loads():
    r = placed()
    again = SearchResult.from_dict(json.loads(r.to_json()))
    assert again == r and again.best.placements_us == (155.3, 151.6, 159.7, 160.0)
    old = json.loads(recorded().to_json())
    old["schema_version"] = "1.0"
    for t in old["confirmed"]:
        del t["placements_us"]
    assert SearchResult.from_dict(old).best.placements_us == ()


def test_the_report_and_the_pane_say_the_gain_at_each_place_of_the_inputs():
    from rich.console import Console

    from tui.app.widgets.search import summary_rows
    from tui.cli.search import summary
    from tui.present.format import placement_words

    words = placement_words(placed())
    assert words == (
        "inputs at 4 places in memory: best 151.60 µs-160.00 µs, pick 163.50 µs-164.40 µs; "
        "gain +2.1% to +7.4% (median of places shown)"
    )
    assert placement_words(recorded()) == ""
    console = Console(width=300, record=True)
    console.print(summary_rows(placed()))
    assert "where inputs lie  " + words in console.export_text()
    assert words in summary(placed()).plain
