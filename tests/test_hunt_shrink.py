"""The hunt's logic without an engine: shrinking planted failure classes (a combination of fields,
a size threshold, a crash, a length 64 mod 128 with grouped heads) to exactly their planted
signature and boundary; a failure's outcome read from a result; candidates made valid; the
draws; and the job itself driven by planted answers: each class found once, counted, shrunk,
said whose, within its budget on a clock that the test moves."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hunt_fakes import WRONG, gqa_wrong_backward_nan, planted_result

from tui.jobs.hunt import Hunt, HuntOptions, hunt_options
from tui.jobs.hunt_draw import FOCUS, hazard_config, parse_focus
from tui.jobs.hunt_findings import findings_table
from tui.jobs.hunt_shrink import (
    BOUNDARY,
    CONFIRM,
    CRASH,
    MISMATCH,
    NONFINITE,
    OTHER,
    PASS,
    Outcome,
    fit,
    matches,
    outcome_of,
    shrink,
    size_candidates,
    valid,
)
from tui.model.config import SdpaConfig
from tui.model.results import RunResult
from tui.model.statuses import BACKWARD, FORWARD, STATUS_CRASH, STATUS_UNSUPPORTED
from tui.model.validation import validate
from tui.model.whose import CUDNN

BIG = SdpaConfig(b=4, h_q=8, h_kv=2, s_q=256, s_kv=512, d_qk=128, d_v=128, dtype="bf16", layout="BHSD",
                 causal="bottom_right", bias="bxh", backward=True, deterministic=True, softmax_out="stats",
                 attn_scale=0.1, seq_lens_q=(200, 100, 256, 3), seq_lens_kv=(512, 300, 20, 400))  # fmt: skip


class Planted:
    """A fake engine over Probes: `rule(config)` is the outcome; every probe is kept."""

    def __init__(self, rule):
        self.rule, self.probes = rule, []

    def __call__(self, probe):
        self.probes.append(probe)
        assert not validate(probe.config), f"an invalid candidate was run: {probe.config.label()}"
        return self.rule(probe.config)


def test_a_combination_of_fields_shrinks_to_exactly_those_fields():
    failing = Outcome(MISMATCH, BACKWARD)
    engine = Planted(
        lambda c: failing if c.bias != "none" and c.causal == "bottom_right" and c.backward else Outcome(PASS)
    )
    s = shrink(BIG, failing, engine)
    assert s.signature == (("causal", "bottom_right"), ("bias", "1x1"), ("backward", "true"))
    m = s.minimal
    assert (m.b, m.h_q, m.h_kv, m.s_q, m.s_kv, m.d_qk, m.d_v) == (1, 1, 1, 1, 1, 8, 8)
    assert (m.dtype, m.layout, m.seq_lens_q, m.attn_scale, m.deterministic, m.softmax_out) == (
        "fp16",
        "BSHD",
        None,
        None,
        False,
        "none",
    )
    assert [n.change for n in s.boundary] == ["causal none", "bias none", "backward false"]
    assert all(n.confirmed for n in s.boundary) and s.confirmed and not s.stopped
    assert [p.purpose for p in engine.probes].count(CONFIRM) == 2 and [
        p.purpose for p in engine.probes
    ].count(BOUNDARY) == 3
    assert not any(p.fresh for p in engine.probes)  # a mismatch's candidates share a process


def test_a_size_threshold_shrinks_to_the_threshold_with_the_size_below_as_its_boundary():
    failing = Outcome(MISMATCH, FORWARD)
    s = shrink(BIG, failing, Planted(lambda c: failing if c.s_kv >= 300 else Outcome(PASS)))
    assert s.signature == (("s_kv", "300"),) and s.minimal.s_kv == 300 and s.minimal.b == 1
    assert [(n.change, n.config.s_kv) for n in s.boundary] == [("s_kv 299", 299)]


def test_a_crash_shrinks_with_every_run_in_a_fresh_process():
    start = SdpaConfig(b=2, h_q=32, h_kv=16, s_q=512, s_kv=4096, d_qk=128, d_v=128, dtype="fp8_e4m3",
                       dropout=0.1, dropout_seed=5, causal="none")  # fmt: skip
    engine = Planted(lambda c: Outcome(CRASH) if c.fp8 and c.dropout else Outcome(PASS))
    s = shrink(start, Outcome(CRASH), engine)
    assert s.signature == (("dtype", "fp8_e4m3"), ("dropout", "0.1")) and s.confirmed
    assert s.minimal.label() == "b1 h1 s1 d8 fp8_e4m3 BSHD drop0.1"
    assert engine.probes and all(p.fresh for p in engine.probes)


def test_a_length_64_mod_128_with_grouped_heads_keeps_the_length_and_two_heads():
    failing = Outcome(NONFINITE, BACKWARD)

    def rule(c):
        return failing if c.s_q % 128 == 64 and c.h_q != c.h_kv and c.causal != "none" else Outcome(PASS)

    s = shrink(SdpaConfig(b=3, h_q=32, h_kv=8, s_q=704, s_kv=704, backward=True), failing, Planted(rule))
    assert (s.minimal.h_q, s.minimal.h_kv, s.minimal.s_q, s.minimal.b) == (2, 1, 64, 1)
    assert s.signature == (("h_q", "2"), ("s_q", "64"), ("causal", "top_left"))


def test_another_failure_is_not_the_same_failure():
    """A candidate that fails differently (a crash where O was wrong) is not kept, nor a
    boundary: the signature holds what it passes without, and b=2 does not pass."""
    failing = Outcome(MISMATCH, FORWARD)
    s = shrink(BIG, failing, Planted(lambda c: failing if c.b > 2 else Outcome(CRASH)))
    assert s.minimal.b == 3 and s.signature == () and s.boundary == ()


def test_shrinking_stops_when_the_budget_says_so_and_says_why():
    failing = Outcome(MISMATCH, FORWARD)
    budget = iter([""] * 5)
    s = shrink(BIG, failing, Planted(lambda c: failing), halt=lambda: next(budget, "the budget ran out"))
    assert s.runs == 5 and s.stopped == "the budget ran out" and not s.confirmed


def test_a_result_says_its_outcome():
    config = SdpaConfig(backward=True)
    assert outcome_of(planted_result(config, None)) == Outcome(PASS)
    assert outcome_of(planted_result(config, None, wrong=BACKWARD)).same(Outcome(MISMATCH, BACKWARD))
    assert outcome_of(planted_result(config, None, nan=FORWARD)).same(Outcome(NONFINITE, FORWARD))
    assert outcome_of(RunResult(config, STATUS_CRASH, "SIGSEGV")).kind == CRASH
    assert outcome_of(RunResult(config, STATUS_UNSUPPORTED, "no")).kind == OTHER


def test_candidates_are_made_valid():
    c = fit(BIG.replace(b=2, h_q=6, s_q=100, s_kv=50, window=400, page_size=64))
    assert (c.h_kv, c.seq_lens_q, c.seq_lens_kv, c.window, c.page_size) == (2, (100, 100), (50, 50), 50, 50)
    assert fit(BIG.replace(backward=False)).deterministic is False
    assert fit(BIG.replace(seq_lens_q=None)).seq_lens_kv is None  # a padding mask has both sides or none
    assert size_candidates(SdpaConfig(s_q=704, s_kv=704), "s_q")[:8] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert size_candidates(SdpaConfig(h_q=12, h_kv=4), "h_q") == [4, 8]
    assert size_candidates(SdpaConfig(h_q=12, h_kv=4), "h_kv") == [1, 2, 3]


def test_the_draws_are_valid_repeatable_and_focused():
    a = [hazard_config(random.Random(3)) for _ in range(2)]
    assert a[0] == a[1]
    rng = random.Random(4)
    draws = [hazard_config(rng, ("paged", "backward", "gqa")) for _ in range(25)]
    assert all(valid(c) and c.paged and c.backward and c.h_kv < c.h_q for c in draws)
    assert parse_focus(" Paged, thd ,paged") == ("paged", "thd")
    with pytest.raises(ValueError, match="unknown focus nope"):
        parse_focus("paged,nope")
    assert set(FOCUS) >= {"paged", "thd", "backward", "fp8"}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def drive(job: Hunt, answer, clock: Clock | None = None, run_s: float = 0.0) -> list:
    """The job's runs answered by `answer(config, options)`, each costing `run_s` on `clock`."""
    asks, ask = [], job.first()
    while ask is not None:
        asks.append(ask)
        if clock is not None:
            clock.now += run_s
        ask = job.answered(answer(ask.config, ask.options))
    return asks


def test_the_hunt_finds_each_planted_class_once_and_counts_the_draws_that_fall_in_it():
    found = []
    job = Hunt(HuntOptions(budget_s=600, seed=5, focus=("gqa",), max_configs=12), on_finding=found.append)
    asks = drive(job, gqa_wrong_backward_nan)
    kinds = {f.shrunk.failure.kind: f for f in job.findings}
    gqa = kinds[MISMATCH].shrunk
    assert matches(SdpaConfig(h_q=8, h_kv=2), gqa.failure, gqa) and not matches(
        SdpaConfig(h_q=8, h_kv=8), gqa.failure, gqa
    )
    assert len(job.findings) == 2 and set(kinds) == {MISMATCH, NONFINITE}
    assert kinds[MISMATCH].shrunk.signature == (("h_q", "2"),)
    assert kinds[NONFINITE].shrunk.signature == (("backward", "true"),)
    assert sum(f.count for f in job.findings) == job.drawn == 12  # every draw fails, one way or the other
    assert all(f.whose.who == CUDNN for f in job.findings) and all(f.shrunk.confirmed for f in job.findings)
    assert {f.number for f in found} == {1, 2} and job.end_words().startswith("the 12 configurations")
    confirms = [a for a in asks if a.options.peers]
    assert len(confirms) == 4 and all(a.options.cross_check and a.options.no_history for a in asks)
    table = findings_table(job.findings)
    assert [r.cells[3] for r in table.rows] == ["h_q 2", "backward true"] or [r.cells[3] for r in table.rows] == [
        "backward true", "h_q 2"]  # fmt: skip


def test_the_budget_bounds_the_whole_hunt():
    """Each run costs 10 s on the test's clock: no run starts that 60 s cannot hold."""
    clock = Clock()
    job = Hunt(HuntOptions(budget_s=60, seed=1, focus=("gqa",)), clock=clock)
    drive(job, gqa_wrong_backward_nan, clock, run_s=10.0)
    assert 0 < clock.now <= 60 and job.end_words() == "the budget of 60 s was spent"
    assert job.findings and not job.findings[0].shrunk.confirmed  # cut short, and it says so
    assert job.findings[0].shrunk.stopped == "the budget ran out"


def test_a_stopped_hunt_draws_no_more_and_keeps_what_it_found():
    job = Hunt(HuntOptions(budget_s=600, seed=2, focus=("gqa",)))
    ask = job.first()
    ask = job.answered(gqa_wrong_backward_nan(ask.config, ask.options))  # a failure: shrinking starts
    job.stop()  # while the first candidate runs
    assert job.answered(gqa_wrong_backward_nan(ask.config, ask.options)) is None  # no run after it
    assert job.drawn == 1 and len(job.findings) == 1 and job.end_words() == "stopped when asked"
    assert job.findings[0].shrunk.stopped == "stopped when asked" and not job.findings[0].shrunk.confirmed


def test_a_draw_matches_a_class_by_its_signature():
    failing = Outcome(MISMATCH, FORWARD)
    s = shrink(BIG, failing, Planted(lambda c: failing if c.bias != "none" else Outcome(PASS)))
    assert s.signature == (("bias", "1x1"),) and matches(BIG, failing, s)  # bxh is past 1x1
    assert not matches(BIG.replace(bias="none"), failing, s)
    assert not matches(BIG, Outcome(MISMATCH, BACKWARD), s)


def test_hunt_runs_are_checked_cross_checked_quick_and_a_crash_runs_fresh():
    o = hunt_options(7, peers=True, fresh=True)
    assert o.cross_check and o.check and not o.autotune and o.seed == 7 and o.peers and o.retire_after
    assert o.timing.replays == 1 and not hunt_options(7).peers and not hunt_options(7).retire_after
    assert WRONG.passed is False


def test_an_input_recipe_shrinks_item_by_item_keeping_its_seed():
    """NaN in padded parts that an output reads: the recipe keeps pad:nan and its seed, drops the rest."""
    failing = Outcome(NONFINITE, FORWARD)
    start = SdpaConfig(b=2, h_q=4, h_kv=4, s_q=128, s_kv=128, seq_lens_q=(100, 128), seq_lens_kv=(60, 128),
                       inputs="seed:5,scale:100,pad:nan")  # fmt: skip
    s = shrink(
        start, failing, Planted(lambda c: failing if "pad:nan" in c.inputs and c.varlen else Outcome(PASS))
    )
    assert s.minimal.inputs == "seed:5,pad:nan" and ("inputs", "seed:5,pad:nan") in s.signature
    assert s.minimal.varlen and s.minimal.b == 1 and s.confirmed


def test_a_failing_draw_the_known_issues_hold_is_no_new_finding():
    import dataclasses

    from tui.model.results import KnownIssueMatch

    held = KnownIssueMatch("hunt-gqa", "O wrong with grouped heads", "wrong result", "a hunt")

    def answer(config, options):
        result = gqa_wrong_backward_nan(config, options)
        return dataclasses.replace(result, known_issues=(held,)) if config.h_q != config.h_kv else result

    job = Hunt(HuntOptions(budget_s=600, seed=5, focus=("gqa",), max_configs=6))
    drive(job, answer)
    assert not job.findings and job.tally["known issue"] == 6


def _peers_from_16(rule_nan_where):
    """A planted non-finite O wherever `rule_nan_where` says, and peers only from head dim 16 on
    (as Flex), so a shrink down to head dim 8 leaves none beside cuDNN."""

    def answer(config, options):
        peers = options if config.d_qk >= 16 else hunt_options(1)  # no peers below 16
        return planted_result(config, peers, nan=FORWARD if rule_nan_where(config) else "")

    return answer


@pytest.mark.parametrize(("fails_at_64", "who"), [(True, CUDNN), (False, "unknown")])
def test_whose_bug_is_asked_where_the_peers_run_when_none_ran_at_the_minimal_head_dim(fails_at_64, who):
    job = Hunt(HuntOptions(budget_s=600, seed=3, max_configs=1))
    asks = drive(job, _peers_from_16(lambda c: fails_at_64 or c.d_qk != 64))
    (finding,) = job.findings
    assert finding.shrunk.minimal.d_qk == 8 and finding.whose.who == who
    wider = [a for a in asks if a.config.d_qk == 64 and a.options.peers]
    assert len(wider) == 1 and wider[0].config == finding.shrunk.minimal.replace(d_qk=64, d_v=64)
    if fails_at_64:
        assert "at d_qk = d_v = 64: at 8 no peer ran" in finding.whose.why


def test_draws_that_did_not_run_are_counted_by_why_and_cudnns_refusals_by_their_words():
    def answer(config, options):
        if config.d_qk > 64:
            words = f"No valid engine configs for d={config.d_qk}"  # the words differ by d: counted apart
            return RunResult(
                config=config, status=STATUS_UNSUPPORTED, message=f"{words}; the nearest that works"
            )
        if config.dtype == "fp16":
            return RunResult(config=config, status=STATUS_UNSUPPORTED, message="fp16 declined (here)")
        return planted_result(config, options)

    job = Hunt(HuntOptions(budget_s=600, seed=2, max_configs=40))
    asks = drive(job, answer)  # nothing fails, so each run is a draw
    expected = Counter(
        f"No valid engine configs for d={a.config.d_qk}" if a.config.d_qk > 64 else "fp16 declined"
        for a in asks if a.config.d_qk > 64 or a.config.dtype == "fp16"
    )  # fmt: skip
    assert len(asks) == job.drawn == 40 and sum(job.tally.values()) == 40 and "other" not in job.tally
    assert job.refusals == expected and job.tally["refused by cuDNN"] == sum(expected.values()) > 0
    assert len(expected) > 1  # refusals of different words are counted apart
