"""What changed between two results: a run against another (`compare`, for `sdpa-explorer compare`
and the history), and a whole check against the baseline it saved before an upgrade (`check
--baseline`), so that a driver, CUDA or cuDNN upgrade that slows a case or breaks it is flagged
rather than found months later by someone re-running an old script.

A case is flagged when it got slower by more than max(5%, the two runs' combined p10-p90 spread)
in the same timing regime, or when it started failing. Figures taken in different regimes (burst
against sustained) say nothing of each other: such a case is reported as not comparable.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.results import Environment, PassResult, PlanResult, RunResult
from ..model.statuses import GOOD_STATUSES
from .reading import Obj

BASELINE_KIND = "sdpa-explorer check baseline"  # what a baseline file says it is
BASELINE_VERSION = 1
MIN_SLOWER_PCT = 5.0  # below this a slowdown is never flagged, however steady the figures
# the environment a comparison names when it differs: (what a person calls it, Environment field)
ENVIRONMENT_FIELDS = (
    ("GPU", "gpu_name"),
    ("driver", "driver_version"),
    ("CUDA", "cuda_runtime"),
    ("torch", "torch_version"),
    ("cuDNN", "cudnn_backend_version"),
    ("frontend", "frontend_version"),
)

# Comparing two runs: what changed, pass by pass and plan by plan, and in the environment.


@dataclass(frozen=True)
class PlanChange:
    """One plan named in either run: its kernel time in each and the change."""

    name: str
    a_us: float | None
    b_us: float | None
    change_pct: float | None
    a_state: str  # "ok", "not built", "mismatch", "untimed", "absent"
    b_state: str
    a_pick: bool = False  # the heuristic's pick in that run
    b_pick: bool = False


@dataclass(frozen=True)
class OutputChange:
    """One output of a pass (O, dQ, ...): cuDNN's max abs error against the reference in each."""

    output: str
    a_max_abs: float | None
    b_max_abs: float | None
    a_passed: bool | None
    b_passed: bool | None


@dataclass(frozen=True)
class PassComparison:
    kind: str
    a_status: str
    b_status: str
    a_us: float | None  # the heuristic pick's kernel time
    b_us: float | None
    change_pct: float | None
    a_regime: str
    b_regime: str
    plans: tuple[PlanChange, ...]
    outputs: tuple[OutputChange, ...]


@dataclass(frozen=True)
class Difference:
    """A field (of the configuration or the environment) that is not the same in both runs."""

    name: str
    a: str
    b: str


@dataclass(frozen=True)
class Comparison:
    """Run a against run b: b's change from a, in % of a's kernel time."""

    a_label: str
    b_label: str
    a_status: str
    b_status: str
    passes: tuple[PassComparison, ...]
    config: tuple[Difference, ...]  # fields set differently (empty: the same configuration)
    environment: tuple[Difference, ...]  # GPU, driver, CUDA, torch, cuDNN, frontend that differ

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def change_pct(a: float | None, b: float | None) -> float | None:
    """b against a, in %: +20 is 20% slower."""
    return 100.0 * (b / a - 1.0) if a and b is not None else None


def environment_changes(a: Environment | None, b: Environment | None) -> tuple[Difference, ...]:
    """The versions and the GPU that are not the same in both (what an upgrade changes)."""
    a, b = a or Environment(gpu_available=False), b or Environment(gpu_available=False)
    return tuple(
        Difference(name, getattr(a, f) or "?", getattr(b, f) or "?")
        for name, f in ENVIRONMENT_FIELDS
        if getattr(a, f) != getattr(b, f)
    )


def _plan_state(p: PlanResult | None) -> str:
    if p is None:
        return "absent"
    if not p.built:
        return "not built"
    if p.matches is False:
        return "mismatch"
    return "ok" if p.timing is not None else "untimed"


def _paired(a: Iterable[Any], b: Iterable[Any], key: str) -> Iterator[tuple[str, Any, Any]]:
    """Each name found in either run (A's order first) with its item in A and in B (None: absent)."""
    by_a, by_b = {getattr(x, key): x for x in a}, {getattr(x, key): x for x in b}
    for name in dict.fromkeys((*by_a, *by_b)):
        yield name, by_a.get(name), by_b.get(name)


def _plans(a: PassResult | None, b: PassResult | None) -> tuple[PlanChange, ...]:
    changes = []
    for name, pa, pb in _paired(a.plans if a else (), b.plans if b else (), "name"):
        ta = pa.timing.median_us if pa and pa.timing else None
        tb = pb.timing.median_us if pb and pb.timing else None
        changes.append(PlanChange(name, ta, tb, change_pct(ta, tb), _plan_state(pa), _plan_state(pb),
                                  bool(pa and pa.index == a.heuristic_plan),
                                  bool(pb and pb.index == b.heuristic_plan)))  # fmt: skip
    return tuple(changes)


def _outputs(a: PassResult | None, b: PassResult | None) -> tuple[OutputChange, ...]:
    found = []
    for name, ca, cb in _paired(a.checks if a else (), b.checks if b else (), "output"):
        ea, eb = (ca.cudnn if ca else None), (cb.cudnn if cb else None)
        found.append(OutputChange(name, ea.max_abs if ea else None, eb.max_abs if eb else None,
                                  ca.passed if ca else None, cb.passed if cb else None))  # fmt: skip
    return tuple(found)


def _pass(kind: str, a: PassResult | None, b: PassResult | None) -> PassComparison:
    ta, tb = (a.timing if a else None), (b.timing if b else None)
    a_us, b_us = (ta.median_us if ta else None), (tb.median_us if tb else None)
    return PassComparison(
        kind=kind,
        a_status=a.status if a else "absent",
        b_status=b.status if b else "absent",
        a_us=a_us,
        b_us=b_us,
        change_pct=change_pct(a_us, b_us),
        a_regime=ta.regime if ta else "",
        b_regime=tb.regime if tb else "",
        plans=_plans(a, b),
        outputs=_outputs(a, b),
    )


def compare(a: RunResult, b: RunResult) -> Comparison:
    """Run b against run a: every pass either has, every plan either lists, every output either
    checked, the configuration's fields that differ and the environment's."""
    kinds = dict.fromkeys([p.kind for p in a.passes] + [p.kind for p in b.passes])
    da, db = a.config.to_dict(), b.config.to_dict()
    config = tuple(
        Difference(k, str(da.get(k, "-")), str(db.get(k, "-")))
        for k in dict.fromkeys((*da, *db))
        if da.get(k) != db.get(k)
    )
    return Comparison(
        a_label=a.config.label(),
        b_label=b.config.label(),
        a_status=a.status,
        b_status=b.status,
        passes=tuple(_pass(k, a.pass_of(k), b.pass_of(k)) for k in kinds),
        config=config,
        environment=environment_changes(a.environment, b.environment),
    )


# A check against its baseline.

SLOWER = "slower"
FAILING = "started failing"
NOT_COMPARABLE = "not comparable"
WITHIN = "within"
NOW_PASSES = "now passes"
NEW = "not in the baseline"
FLAGS = (SLOWER, FAILING)


class BaselineError(ValueError):
    """The file is not a baseline this version reads; the message names it and says why."""


# what read_baseline checks before it reads the cases' results (RunResult checks each of those)
BASELINE_SHAPE = Obj(
    {"cases": [Obj({"case": str, "result": dict}, required=("case", "result"))]}, required=("cases",)
)


@dataclass(frozen=True)
class Baseline:
    """A check's results as `check --save-baseline` wrote them: each case's whole RunResult."""

    path: str
    created: str
    cases: tuple[tuple[str, RunResult], ...]  # (case name, result), in the check's order


@dataclass(frozen=True)
class CaseVerdict:
    """One case (one of its passes, where timing is judged) against the baseline."""

    case: str
    label: str
    verdict: str  # SLOWER, FAILING, NOT_COMPARABLE, WITHIN, NOW_PASSES, NEW
    kind: str = ""  # the pass judged ('' : the case as a whole)
    before_us: float | None = None  # the heuristic pick's median kernel time
    after_us: float | None = None
    change_pct: float | None = None
    allowed_pct: float | None = None  # max(MIN_SLOWER_PCT, the two figures' p10-p90 spreads added)
    why: str = ""

    @property
    def flagged(self) -> bool:
        return self.verdict in FLAGS


@dataclass(frozen=True)
class BaselineReport:
    path: str
    created: str
    verdicts: tuple[CaseVerdict, ...]
    environment: tuple[Difference, ...]  # what changed between the baseline's run and this one
    not_run: int  # baseline cases this check did not run (a --preset subset)

    @property
    def flagged(self) -> tuple[CaseVerdict, ...]:
        return tuple(v for v in self.verdicts if v.flagged)

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "flagged": len(self.flagged)}


def baseline_json(cases: list[tuple[str, RunResult]]) -> str:
    """The file `check --save-baseline` writes: what it is, when, and every case's result."""
    return json.dumps(
        {
            "kind": BASELINE_KIND,
            "version": BASELINE_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cases": [{"case": name, "label": r.config.label(), "result": r.to_dict()} for name, r in cases],
        },
        indent=1,
    )


def save_baseline(path: str, cases: list[tuple[str, RunResult]]) -> Path:
    """Written whole or not at all (tui/store/files.py): a crash never leaves half a baseline."""
    from .files import atomic_write

    return atomic_write(path, baseline_json(cases))


def read_baseline(path: str) -> Baseline:
    """A baseline file (results of any schema this version reads); BaselineError names it."""
    from ..model.config import ConfigError
    from .reading import ParseError, ReadError, read_json, shape_problem, shown_path

    try:
        data = read_json(path)
    except (ReadError, ParseError) as exc:
        raise BaselineError(str(exc)) from exc
    if not isinstance(data, dict) or data.get("kind") != BASELINE_KIND:
        raise BaselineError(f"{shown_path(path)} is not a baseline (check --save-baseline writes them)")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(
            f"{shown_path(path)}: baseline version {str(data.get('version'))[:40]} (this version reads {BASELINE_VERSION})"
        )
    if problem := shape_problem(data, BASELINE_SHAPE):
        raise BaselineError(f"{shown_path(path)}: a case cannot be read: {problem}")
    try:  # a hand-edited file: said, never a traceback
        cases = tuple((c["case"], RunResult.from_dict(c["result"])) for c in data["cases"])
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        raise BaselineError(f"{shown_path(path)}: a case cannot be read: {exc}") from exc
    return Baseline(path=str(path), created=str(data.get("created", ""))[:40], cases=cases)


def judge_pass(name: str, label: str, kind: str, before: PassResult | None, after: PassResult) -> CaseVerdict:
    """One pass's kernel time against the baseline's, in the same regime."""
    a = before.timing if before else None
    b = after.timing
    if a is None or b is None:
        where = "in the baseline" if a is None else "now"
        return CaseVerdict(name, label, NOT_COMPARABLE, kind, why=f"no kernel time {where}")
    if a.regime != b.regime or not a.regime:
        why = f"regime {a.regime or 'not said'} then, {b.regime or 'not said'} now"
        return CaseVerdict(name, label, NOT_COMPARABLE, kind, a.median_us, b.median_us, why=why)
    change = change_pct(a.median_us, b.median_us)
    allowed = max(MIN_SLOWER_PCT, a.spread_pct + b.spread_pct)
    flagged = change is not None and change > allowed
    return CaseVerdict(name, label, SLOWER if flagged else WITHIN, kind, a.median_us, b.median_us,
                       change, allowed, why=a.regime)  # fmt: skip


def judge_case(name: str, before: RunResult | None, after: RunResult) -> list[CaseVerdict]:
    """A case against its baseline: started failing, or each pass's kernel time."""
    label = after.config.label()
    if before is None:
        return [CaseVerdict(name, label, NEW)]
    was_good, is_good = before.status in GOOD_STATUSES, after.status in GOOD_STATUSES
    if not is_good:
        verdict = FAILING if was_good else NOT_COMPARABLE
        why = f"{before.status} then, {after.status} now" + (f": {after.message}" if after.message else "")
        return [CaseVerdict(name, label, verdict, why=why)]
    if not was_good:
        return [CaseVerdict(name, label, NOW_PASSES, why=f"{before.status} then, {after.status} now")]
    if not after.passes:
        return [CaseVerdict(name, label, NOT_COMPARABLE, why="no pass ran now")]
    return [judge_pass(name, label, p.kind, before.pass_of(p.kind), p) for p in after.passes]


def _environment(results: list[RunResult]) -> Environment | None:
    return next((r.environment for r in results if r.environment is not None), None)


def case_key(name: str, result: RunResult) -> tuple[str, str]:
    """What makes two runs the same case: its name and its problem. A pinned plan is not part of
    the problem: a preset pinned to another plan is the same case, run another way."""
    return name, result.config.replace(plan=None).label()


def against_baseline(baseline: Baseline, cases: list[tuple[str, RunResult]]) -> BaselineReport:
    """Every case of this check against the same case (name and problem) in the baseline."""
    before = {}
    for name, result in baseline.cases:
        before.setdefault(case_key(name, result), result)
    verdicts = [v for name, r in cases for v in judge_case(name, before.pop(case_key(name, r), None), r)]
    env_before = _environment([r for _, r in baseline.cases])
    env_now = _environment([r for _, r in cases])
    changed = environment_changes(env_before, env_now) if env_before and env_now else ()
    return BaselineReport(baseline.path, baseline.created, tuple(verdicts), changed, len(before))
