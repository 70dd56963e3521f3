"""A hunt for wrong answers, as both the CLI's `hunt` and the dashboard's Hunt pane run it.

Configurations are drawn (hunt_draw.py) and run through the engine process, every output checked
against the fp32 reference and cross-checked in fp64, a deterministic backward run twice for
identical bits. A draw that fails is first matched against the classes already found (once
each); a new one is shrunk (hunt_shrink.py) to its minimal configuration, confirmed with peers
beside it, and said whose it is (model/whose.py). The budget bounds it all: no run starts that
the time left cannot hold.

The job is a sequence of steps: each an Ask (a configuration and its run options) that its
driver sends to the engine and answers with the RunResult; the CLI waits on each
(process/session.py), the dashboard hands the answers over as they arrive (app/hunting.py).
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass

from ..model.config import SdpaConfig
from ..model.known_issues import CRASH as KNOWN_CRASH
from ..model.known_issues import WRONG_RESULT
from ..model.options import RunOptions
from ..model.results import RunResult
from ..model.sampling import NoConfigFound
from ..model.statuses import STATUS_CPU_ONLY, STATUS_INVALID, STATUS_KNOWN_ISSUE, STATUS_UNSUPPORTED
from ..model.whose import UNKNOWN, Whose, whose
from .hunt_draw import hazard_config
from .hunt_findings import Finding
from .hunt_shrink import (
    CONFIRM,
    MISMATCH,
    NONFINITE,
    OTHER,
    Outcome,
    fit,
    matches,
    outcome_of,
    shrinking,
    valid,
)

DEFAULT_BUDGET_S = 360.0
HUNT_PEERS = ("flash", "efficient", "flex")  # beside a minimal configuration: whose bug it is
FIRST_RUN_S = 5.0  # what a run is taken to cost before any has been timed
HEADROOM = 1.5  # a run starts only when the time left holds this many typical runs
KNOWN_OUTCOMES = (WRONG_RESULT, KNOWN_CRASH)  # a failing draw these known issues hold is no finding
NOT_RUN = {STATUS_UNSUPPORTED: "refused by cuDNN", STATUS_KNOWN_ISSUE: "known issue", STATUS_INVALID: "invalid",
           STATUS_CPU_ONLY: "not run (no GPU)"}  # fmt: skip
PEER_HEAD_DIM = 64  # a head dim every peer takes (Flex none below 16), for whose bug it is


@dataclass(frozen=True)
class HuntOptions:
    budget_s: float = DEFAULT_BUDGET_S  # the whole hunt: draws, shrinking and confirmations
    seed: int = 0  # the draws' seed: the same seed, the same configurations
    focus: tuple[str, ...] = ()  # hunt_draw.FOCUS: features every draw has
    max_configs: int | None = None  # stop drawing after this many (None: the budget decides)


@dataclass(frozen=True)
class Ask:
    """Run this configuration with these options; `words` say why, for the progress line."""

    config: SdpaConfig
    options: RunOptions
    words: str


def hunt_options(seed: int, peers: bool = False, fresh: bool = False) -> RunOptions:
    """The run options of a hunt's run: checked and cross-checked in fp64, the heuristic's plan
    only, one short timing (kernel time is not what a hunt is after), kept out of the history;
    with peers for a confirmation; in a process of its own for a crash's candidates."""
    options = RunOptions(
        autotune=False,
        cross_check=True,
        seed=seed,
        peers=HUNT_PEERS if peers else (),
        no_history=True,
        retire_after=fresh,
    )
    return options.with_timing(replays=1, warmup=1, target_replay_ms=0.5, burst_ms=5.0)


class Hunt:
    """One hunt: its draws, what they came to, and the findings, each once."""

    def __init__(
        self,
        options: HuntOptions,
        clock: Callable[[], float] = time.monotonic,
        on_finding: Callable[[Finding], None] | None = None,
    ) -> None:
        self.options = options
        self.clock = clock
        self.on_finding = on_finding or (lambda _finding: None)
        self.findings: list[Finding] = []
        self.drawn = 0
        self.tally: Counter[str] = Counter()  # the draws' outcomes: pass, a failure kind, or why not run
        self.refusals: Counter[str] = Counter()  # cuDNN's words for the draws it refused
        self.words = ""  # what it does now
        self.stopped = ""  # why it ended before its budget ('' while it runs, or when it ran out)
        self.stopping = False
        self.started = clock()
        self._durations: list[float] = []
        self._asked_at = 0.0
        self._steps = self._work()

    # ---- what the driver says -------------------------------------------------------------
    def first(self) -> Ask | None:
        """The first run to ask for (None: nothing to do in this budget)."""
        return self._advance(lambda: next(self._steps))

    def answered(self, result: RunResult) -> Ask | None:
        """The answer to the last Ask; the next one, or None when the hunt is over."""
        self._durations.append(max(self.clock() - self._asked_at, 0.0))
        return self._advance(lambda: self._steps.send(result))

    def stop(self) -> None:
        """Stop drawing; the shrinking under way stops at its next run, what it found kept."""
        self.stopping = True
        self.stopped = self.stopped or "stopped when asked"

    # ---- what it says ---------------------------------------------------------------------
    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.started

    @property
    def left_s(self) -> float:
        return self.options.budget_s - self.elapsed_s

    def typical_run_s(self) -> float:
        return statistics.median(self._durations[-20:]) if self._durations else FIRST_RUN_S

    def halt(self) -> str:
        """Why no other run may start ('' while one may): stopped, or the time left does not hold
        a typical run."""
        if self.stopping:
            return self.stopped
        return "" if self.left_s >= HEADROOM * self.typical_run_s() else "the budget ran out"

    # ---- the steps ------------------------------------------------------------------------
    def _advance(self, step: Callable[[], Ask]) -> Ask | None:
        try:
            ask = step()
        except StopIteration:
            self.words = ""
            return None
        self.words, self._asked_at = ask.words, self.clock()
        return ask

    def _may_draw(self) -> bool:
        cap = self.options.max_configs
        return (cap is None or self.drawn < cap) and not self.halt()

    def _work(self) -> Generator[Ask, RunResult, None]:
        rng = random.Random(self.options.seed)
        while self._may_draw():
            try:
                config = hazard_config(rng, self.options.focus)
            except NoConfigFound as exc:
                self.stopped = str(exc)
                return
            seed = rng.randrange(1 << 31)
            self.drawn += 1
            result = yield Ask(config, hunt_options(seed), f"configuration {self.drawn}: {config.label()}")
            outcome = outcome_of(result)
            if outcome.failed and any(k.outcome in KNOWN_OUTCOMES for k in result.known_issues):
                self.tally["known issue"] += 1  # a class the known issues hold: not a new finding
                continue
            self.tally[outcome.kind if outcome.kind != OTHER else not_run_words(result)] += 1
            if result.status == STATUS_UNSUPPORTED:
                self.refusals[refusal_words(result.message)] += 1
            if not outcome.failed:
                continue
            known = next((f for f in self.findings if matches(config, outcome, f.shrunk)), None)
            if known is not None:  # a class found before: counted, not shrunk again
                known.count += 1
                self.on_finding(known)
                continue
            yield from self._shrink(config, outcome, result, seed)

    def _whose_where_peers_run(
        self, minimal: SdpaConfig, outcome: Outcome, seed: int, number: int, verdict: Whose
    ) -> Generator[Ask, RunResult, Whose]:
        """Shrinking toward head dim 8 can leave no peer that runs (Flex takes none below 16):
        the minimal configuration at PEER_HEAD_DIM, run with the peers, says whose it is when it
        fails the same way there; else the verdict stays."""
        wider = fit(
            minimal.replace(d_qk=max(minimal.d_qk, PEER_HEAD_DIM), d_v=max(minimal.d_v, PEER_HEAD_DIM))
        )
        if wider == minimal or not valid(wider) or self.halt():
            return verdict
        words = f"finding {number}: whose bug, at head dim {PEER_HEAD_DIM} where the peers run"
        result = yield Ask(wider, hunt_options(seed, peers=True), words)
        there = whose(result)
        if not outcome_of(result).same(outcome) or there.who == UNKNOWN:
            return verdict
        return Whose(there.who, f"{there.why} (at d_qk = d_v = {wider.d_qk}: at {minimal.d_qk} no peer ran)")

    def tally_words(self) -> str:
        """What the draws came to, e.g. '3 mismatch, 40 pass, 12 refused by cuDNN'."""
        return ", ".join(f"{n} {kind}" for kind, n in sorted(self.tally.items())) or "none run"

    def end_words(self) -> str:
        """How the hunt ended (or stands): stopped, the draws asked for made, or the budget spent."""
        if self.stopped:
            return self.stopped
        if self.options.max_configs is not None and self.drawn >= self.options.max_configs:
            return f"the {self.drawn} configurations asked for were drawn"
        return f"the budget of {self.options.budget_s:.0f} s was spent"

    def _shrink(
        self, config: SdpaConfig, outcome: Outcome, first: RunResult, seed: int
    ) -> Generator[Ask, RunResult, None]:
        """Shrink one new failure, its confirmations run with peers; then keep it once."""
        number = len(self.findings) + 1
        steps = shrinking(config, outcome, self.halt)
        confirmations: list[RunResult] = []
        try:
            probe = next(steps)
            while True:
                options = hunt_options(seed, peers=probe.purpose == CONFIRM, fresh=probe.fresh)
                words = f"shrinking finding {number} ({outcome}): {probe.words}"
                result = yield Ask(probe.config, options, words)
                if probe.purpose == CONFIRM:
                    confirmations.append(result)
                probe = steps.send(outcome_of(result))
        except StopIteration as done:
            shrunk = done.value
        failing = [r for r in confirmations if outcome_of(r).same(outcome)]
        shown = failing[-1] if failing else first
        verdict = whose(shown)
        if verdict.who == UNKNOWN and outcome.kind in (MISMATCH, NONFINITE) and not _peers_ran(shown):
            verdict = yield from self._whose_where_peers_run(shrunk.minimal, outcome, seed, number, verdict)
        finding = Finding(number, shrunk, first, shown, seed, verdict)
        same = next((f for f in self.findings if f.key == finding.key), None)
        if same is not None:  # shrunk to a class found before
            same.count += 1
            self.on_finding(same)
            return
        self.findings.append(finding)
        self.on_finding(finding)


def _peers_ran(result: RunResult) -> bool:
    """Whether any peer's output was checked beside cuDNN's in this run."""
    return any(c.peers for p in result.passes for c in p.checks)


def not_run_words(result: RunResult) -> str:
    """Why a draw came to no verdict, as the hunt's tally counts it."""
    return NOT_RUN.get(result.status, result.status or "not run")


def refusal_words(message: str) -> str:
    """A refusal's first clause, so that the same refusal of many draws is counted as one."""
    first = message.split(";")[0].split(" (")[0].strip()
    return first[:90] or "no words"
