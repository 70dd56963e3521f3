"""The fastest way to run a pass: of cuDNN's pick (the heuristic's first plan), cuDNN's fastest
plan, the configuration's pinned plan (a knob search's, where the preset has one), each equivalent
form of the configuration (model/equivalents.py) and every peer that ran, the fastest whose output
did not fail its check; with its margin over cuDNN's pick. A faster kernel whose output failed its
check is a finding, never the winner. Where cuDNN declined the pass (or is known to), the peers
that ran contend alone, with no margin: there is no pick to measure one against. Plain records: the headline, the Peers pane, `check` and the
sweep's rows all read this one answer."""

from __future__ import annotations

from dataclasses import dataclass

from .results import ErrorMetrics, PassResult, TimingStats
from .statuses import STATUS_KNOWN_ISSUE, STATUS_UNSUPPORTED

PICK, FASTEST, PINNED, FORM, PEER = "pick", "fastest plan", "pinned plan", "form", "peer"


@dataclass(frozen=True)
class Contender:
    """One way to run the pass, timed: who it is, its kernel time and its check."""

    role: str  # PICK, FASTEST, PINNED, FORM or PEER
    name: str  # how a table names it: "cuDNN H", "cuDNN *", "cuDNN P", "cuDNN causal none", "FLASH"
    timing: TimingStats
    passed: bool | None  # its outputs within tolerance; None where they were not checked
    max_abs: float | None = None
    detail: str = ""  # the plan's name, or what a form changes ("causal none")

    @property
    def kernel_us(self) -> float:
        return self.timing.median_us

    @property
    def verdict(self) -> str:
        return {True: "pass", False: "FAIL", None: "not checked"}[self.passed]


@dataclass(frozen=True)
class FastestWay:
    """The winner among the contenders, its margin over cuDNN's pick (the pick's kernel time over
    the winner's: 1.25 is 1.25x faster), and the faster contenders whose check failed; `pick_us`
    None where cuDNN declined the pass and only peers contend (no margin)."""

    pick_us: float | None
    winner: Contender
    contenders: tuple[Contender, ...]
    findings: tuple[Contender, ...] = ()  # faster than the winner, but wrong

    @property
    def margin(self) -> float | None:
        if self.pick_us is None:
            return None
        return self.pick_us / self.winner.kernel_us if self.winner.kernel_us else 1.0

    @property
    def declined(self) -> bool:
        """Whether cuDNN ran nothing: the peers contend alone."""
        return self.pick_us is None

    @property
    def is_pick(self) -> bool:
        return self.winner.role == PICK


def _worst(metrics: list[ErrorMetrics]) -> ErrorMetrics | None:
    """The output furthest from its check: one outside its tolerance first, else the largest error."""
    return max(metrics, key=lambda m: (not m.passed, m.max_abs), default=None)


def _plans(p: PassResult) -> list[Contender]:
    """cuDNN's own: the heuristic's pick, the fastest plan, the pinned plan (each once)."""
    found: list[Contender] = []
    seen: set[int] = set()
    for role, index, mark in ((PICK, p.heuristic_plan, "H"), (FASTEST, p.fastest_plan, "*"),
                              (PINNED, p.pinned_plan, "P")):  # fmt: skip
        plan = p.plan(index)
        if plan is None or plan.timing is None or plan.index in seen:
            continue
        seen.add(plan.index)
        found.append(
            Contender(role, f"cuDNN {mark}", plan.timing, plan.matches, plan.max_abs_error, plan.name)
        )
    return found


def _forms(p: PassResult) -> list[Contender]:
    return [
        Contender(FORM, f"cuDNN {f.words}", f.timing, f.matches, f.max_abs_error, f.words)
        for f in p.forms
        if f.timing is not None
    ]


def _peers(p: PassResult) -> list[Contender]:
    """Every peer that ran, whatever its key, with the worst of its checked outputs."""
    found = []
    for peer in p.field_peers:
        if peer.timing is None:
            continue
        worst = _worst([c.peers[peer.name] for c in p.checks if peer.name in c.peers])
        passed = None if worst is None else worst.passed
        short = peer.name.removeprefix("torch ").rsplit(" ", 1)[0]
        found.append(Contender(PEER, short, peer.timing, passed, worst and worst.max_abs, peer.name))
    return found


def contenders(p: PassResult) -> tuple[Contender, ...]:
    """Every timed way to run the pass: cuDNN's plans, its equivalent forms, then the peers."""
    return (*_plans(p), *_forms(p), *_peers(p))


def declined(p: PassResult) -> bool:
    """Whether cuDNN did not run the pass: it declined it, or is known to (its peers may have)."""
    return p.status in (STATUS_UNSUPPORTED, STATUS_KNOWN_ISSUE)


def fastest_way(p: PassResult) -> FastestWay | None:
    """The fastest contender whose check did not fail; None where cuDNN's pick was not timed (there
    is nothing to measure a margin against) or no other contender was. Where cuDNN declined the
    pass, the fastest of the peers that ran whose check did not fail, without a margin."""
    found = contenders(p)
    pick = next((c for c in found if c.role == PICK), None)
    if pick is None and not (declined(p) and found):
        return None
    if pick is not None and len(found) < 2:
        return None
    fair = [c for c in found if c.passed is not False]
    if not fair:
        return None
    winner = min(fair, key=lambda c: c.kernel_us)  # the first of equal times: cuDNN's pick leads
    wrong = sorted((c for c in found if c.passed is False and c.kernel_us < winner.kernel_us),
                   key=lambda c: c.kernel_us)  # fmt: skip
    return FastestWay(pick.kernel_us if pick else None, winner, found, tuple(wrong))
