"""A search of cuDNN's knob space for plans its heuristics do not offer.

The heuristics hand back a few plans, but an engine takes other knob settings, and some run
faster (DESIGN fact 21: KERNEL_CFG=27 of engine 1 is 11.5% faster than the pick for a decode).
Each engine's knobs form a space (one axis a knob, from cuDNN's own knob query); a small space
is tried whole, a large one by random draws with a local refinement around the best so far,
until the time budget ends. This module is the strategy alone: `search` is handed a `try_plan`
that builds, checks and times one candidate (knob_trials.py on the GPU, a fake in the tests),
so the order of candidates, the budget and what counts as a winner are tested without a GPU.

A candidate whose output fails the check is a finding, never a winner, however fast it runs.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .pins import Pin

EXHAUSTIVE_MAX = 128  # a space of at most this many settings is tried whole
MAX_TRIALS = 20_000  # a bound on any search, whatever the budget
DRAW_ATTEMPTS = 64  # random draws per candidate before a large space counts as seen through

# what became of a candidate
BUILT, BUILD_FAILED, CHECK_FAILED, TIMING_FAILED = "built", "build failed", "check failed", "timing failed"
CRASHED = (
    "crashed"  # it lost the CUDA context or killed the engine process: the search went on in a fresh one
)
# where a trial comes from
HEURISTIC, PINNED, SEARCHED = "heuristic", "pinned", "searched"
CANDIDATE_WORDS = "searching: candidate"  # how progress names the candidate being tried (see trying())
# why a search ended
STOP_BUDGET, STOP_SPACE, STOP_CANCELLED, STOP_LIMIT = (
    "budget spent",
    "space exhausted",
    "cancelled",
    "trial limit",
)


@dataclass(frozen=True)
class KnobAxis:
    """One knob an engine takes: lo..hi in steps of `stride` (cuDNN's knob query says which)."""

    name: str
    lo: int
    hi: int
    stride: int = 1

    @property
    def count(self) -> int:
        return max(0, (self.hi - self.lo) // max(self.stride, 1) + 1)

    def value(self, i: int) -> int:
        return self.lo + i * max(self.stride, 1)

    def position(self, value: int) -> int | None:
        step = max(self.stride, 1)
        i, off = divmod(value - self.lo, step)
        return i if off == 0 and 0 <= i < self.count else None


@dataclass(frozen=True)
class EngineSpace:
    """An engine's knob settings: every combination of its axes."""

    engine_id: int
    axes: tuple[KnobAxis, ...] = ()
    source: str = "cuDNN's knob query"  # or: the knob types its plans carry

    @property
    def size(self) -> int:
        return math.prod(a.count for a in self.axes)

    @property
    def exhaustive(self) -> bool:
        return self.size <= EXHAUSTIVE_MAX

    def pin(self, positions: tuple[int, ...]) -> Pin:
        return Pin.of(self.engine_id, {a.name: a.value(i) for a, i in zip(self.axes, positions, strict=True)})

    def every(self) -> Iterator[Pin]:
        def walk(prefix: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            if len(prefix) == len(self.axes):
                yield prefix
                return
            for i in range(self.axes[len(prefix)].count):
                yield from walk((*prefix, i))

        return (self.pin(p) for p in walk(()))

    def draw(self, rng: random.Random) -> Pin:
        return self.pin(tuple(rng.randrange(a.count) for a in self.axes))

    def neighbours(self, pin: Pin) -> list[Pin]:
        """The settings one step away on one axis: where a local refinement looks next."""
        knobs = pin.knob_dict()
        at = [a.position(knobs.get(a.name, a.lo)) for a in self.axes]
        if pin.engine_id != self.engine_id or None in at:
            return []
        out = []
        for k, axis in enumerate(self.axes):
            for step in (-1, 1):
                i = at[k] + step  # type: ignore[operator]
                if 0 <= i < axis.count:
                    out.append(self.pin((*at[:k], i, *at[k + 1 :])))  # type: ignore[arg-type]
        return out

    def to_dict(self) -> dict:
        return {"engine_id": self.engine_id, "source": self.source, "size": self.size,
                "axes": [[a.name, a.lo, a.hi, a.stride] for a in self.axes]}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict) -> EngineSpace:
        return cls(int(d["engine_id"]), tuple(KnobAxis(*a) for a in d.get("axes", ())), d.get("source", ""))


@dataclass(frozen=True)
class Trial:
    """One candidate plan and what became of it: built or not, right or not, its kernel time."""

    plan: str  # the pin's text: engine id, then its knobs
    status: str  # BUILT, BUILD_FAILED, CHECK_FAILED, TIMING_FAILED
    origin: str = SEARCHED  # HEURISTIC, PINNED or SEARCHED
    name: str = ""  # cuDNN's name of the plan, where it has one
    median_us: float | None = None
    p10_us: float | None = None
    p90_us: float | None = None
    max_abs_error: float | None = None
    error: str = ""
    seconds: float = 0.0  # what trying it cost: building, checking and timing
    replay_us: float | None = None  # GPU time per execution in a CUDA graph of back-to-back executions
    kernels: int | None = None  # kernels one execution launches
    # its time (as time_us ranks it) with the inputs at each of the confirmation's places in memory:
    # a plan's time can depend on where K and V lie, so the confirmed figure is their median
    placements_us: tuple[float, ...] = ()

    @property
    def passed(self) -> bool:
        """Built, right, and timed: a candidate that may win."""
        return self.status == BUILT and self.median_us is not None

    @property
    def overlapped(self) -> bool:
        return overlaps(self.median_us, self.replay_us, self.kernels)

    @property
    def time_us(self) -> float | None:
        """What the search ranks by: the kernel time, or where kernels overlap, the replay's time;
        once confirmed at several places in memory, the median of those."""
        if self.placements_us:
            return statistics.median(self.placements_us)
        return ranked_us(self.median_us, self.replay_us, self.kernels)

    @property
    def pin(self) -> Pin:
        from .pins import parse

        return parse(self.plan)

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> Trial:
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        d["placements_us"] = tuple(d.get("placements_us", ()))
        return cls(**d)


def overlaps(median_us: float | None, replay_us: float | None, kernels: int | None) -> bool:
    """A plan's kernels overlap (programmatic dependent launch): their durations add up to more than
    the GPU spends on an execution, so the replay's time per execution is the truer figure."""
    return bool(kernels and kernels > 1 and replay_us and median_us and replay_us < median_us)


def ranked_us(median_us: float | None, replay_us: float | None, kernels: int | None) -> float | None:
    """A figure as the search ranks it: the kernel time, or where the kernels overlap, the replay's."""
    return replay_us if overlaps(median_us, replay_us, kernels) else median_us


def fastest(trials: list[Trial] | tuple[Trial, ...]) -> Trial | None:
    """The fastest trial that passed (built, right, timed)."""
    good = [t for t in trials if t.passed]
    return min(good, key=lambda t: t.time_us or math.inf) if good else None


@dataclass
class Budget:
    """Seconds a search may spend, on a clock the tests can drive."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.started = self.clock()

    @property
    def spent(self) -> float:
        return self.clock() - self.started

    @property
    def over(self) -> bool:
        return self.spent >= self.seconds


def search(
    spaces: list[EngineSpace],
    try_plan: Callable[[Pin], Trial],
    budget: Budget,
    known: tuple[Trial, ...] = (),
    progress: Callable[[str], None] = lambda _text: None,
    seed: int = 0,
) -> tuple[list[Trial], str]:
    """Try candidates until the budget is spent or every space is seen: first each small space
    whole, then random draws from the large ones, and after every new best its neighbours (one
    step on one axis) before any further draw. `known` trials (the heuristic's plans, timed
    already) are never tried again and count as bests to refine around. Returns the new trials
    and why the search ended. `progress` may raise to cancel: it is called before each try."""
    rng = random.Random(seed)
    seen = {t.pin for t in known}
    trials: list[Trial] = []
    best = fastest(known)
    space_of = {s.engine_id: s for s in spaces}
    refine: list[Pin] = list(_refinements(best, space_of)) if best else []
    small = [p for s in spaces if s.exhaustive for p in s.every()]
    large = [s for s in spaces if not s.exhaustive]

    def next_candidate() -> Pin | None:
        for queue in (refine, small):
            while queue:
                pin = queue.pop(0)
                if pin not in seen:
                    return pin
        while large:
            space = large[len(trials) % len(large)]
            for _ in range(DRAW_ATTEMPTS):
                pin = space.draw(rng)
                if pin not in seen:
                    return pin
            large.remove(space)  # drawn through: what is left is not worth the draws
        return None

    while True:
        if budget.over:
            return trials, STOP_BUDGET
        if len(trials) >= MAX_TRIALS:
            return trials, STOP_LIMIT
        pin = next_candidate()
        if pin is None:
            return trials, STOP_SPACE
        progress(_candidate_text(len(trials) + 1, pin, budget, best))
        seen.add(pin)
        trial = try_plan(pin)
        trials.append(trial)
        if _beats(trial, best):
            best = trial
            refine[:0] = [p for p in _refinements(trial, space_of) if p not in seen]


def _candidate_text(count: int, pin: Pin, budget: Budget, best: Trial | None) -> str:
    """Progress words for the candidate about to be tried (trying() reads them back), and the best so far."""
    lead = f"; best {best.time_us:.2f} µs ({best.plan})" if best and best.time_us else ""
    return f"{CANDIDATE_WORDS} {count}, {pin.text()}, {budget.spent:.0f} of {budget.seconds:.0f} s{lead}"


def _beats(trial: Trial, best: Trial | None) -> bool:
    """A new best to refine around: the trial passed, and none had before or it runs faster than the best."""
    return trial.passed and (best is None or (trial.time_us or math.inf) < (best.time_us or math.inf))


def trying(progress_text: str) -> Pin | None:
    """The candidate a progress report said was being tried, or None: what a search that died
    with its process was doing when it died."""
    from .pins import parse

    if not progress_text.startswith(CANDIDATE_WORDS):
        return None
    parts = progress_text.split(", ")
    try:
        return parse(parts[1]) if len(parts) > 2 else None
    except ValueError:
        return None


def _refinements(trial: Trial, space_of: dict[int, EngineSpace]) -> list[Pin]:
    pin = trial.pin
    space = space_of.get(pin.engine_id)
    return space.neighbours(pin) if space is not None else []
