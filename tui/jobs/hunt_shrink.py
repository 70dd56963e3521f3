"""Shrinking a failure to its smallest form: the hunt's reduction of a failing configuration.

A failure (a mismatch, a non-finite output, a crash, a deterministic pass that is not
repeatable) is reduced, one change at a time, to the smallest configuration that still fails the
same way: the sizes toward the smallest the layout allows (batch and heads toward 1, lengths
toward 1, head dims toward 8), then each option (every field outside the shape, as
model/fields.py declares it) turned off or made simpler; a change is kept only when the failure
persists with the same outcome. Candidates are made valid (`fit`) and checked by
model/validation.py, so no run is spent on a configuration the tool itself refuses. The result is
the minimal configuration, its signature (the options, and the sizes, without which it passes)
and its boundary (those neighbours, which pass), each run twice.

The logic is plain: a generator that yields what to run (a Probe) and is sent each outcome, so
that a blocking driver (the CLI, the tests: `shrink`) and an event-driven one (the dashboard)
drive the same steps. A crash's candidates each ask for a fresh engine process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig
from ..model.fields import FIELD, FIELDS, Choice, Field, Lengths, Switch
from ..model.results import RunResult
from ..model.statuses import STATUS_CRASH, STATUS_OK
from ..model.validation import SHAPE, validate

MISMATCH, NONFINITE, CRASH, NOT_REPEATABLE = "mismatch", "non-finite output", "crash", "not repeatable"
FAILURES = (MISMATCH, NONFINITE, CRASH, NOT_REPEATABLE)
PASS, OTHER = "pass", "other"  # it ran and passed; it did not run (refused, invalid, an error)
SIZES = ("b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v")  # in the order they are shrunk
HEAD_DIM_STEP = 8  # cuDNN takes head dims in multiples of 8
PERIOD = 128  # the tile length a length is tried modulo (64 mod 128 is a hazard of its own)
MAX_ROUNDS = 4  # passes over sizes and options while something still shrinks


@dataclass(frozen=True)
class Outcome:
    """What one run came to: a failure kind (FAILURES) and the pass it showed in, PASS, or OTHER."""

    kind: str
    where: str = ""  # the pass of a mismatch, a non-finite output or a repeat ('' for a crash)
    words: str = ""  # the run's own message (not part of the comparison)

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES

    def same(self, other: Outcome) -> bool:
        """Whether `other` fails the same way: the same kind, in the same pass."""
        return (self.kind, self.where) == (other.kind, other.where)

    def __str__(self) -> str:
        return f"{self.kind} in the {self.where}" if self.where else self.kind


def outcome_of(result: RunResult) -> Outcome:
    """A run's outcome: its first failure (a crash; then per pass a non-finite output, a mismatch,
    a deterministic pass that was not repeatable), PASS where it ran clean, else OTHER."""
    if result.status == STATUS_CRASH:
        return Outcome(CRASH, "", result.message)
    for p in result.passes:
        failed = [c for c in p.checks if c.passed is False]
        if any(c.cudnn.nonfinite for c in failed):
            return Outcome(NONFINITE, p.kind, p.message)
        if failed:
            return Outcome(MISMATCH, p.kind, p.message)
        if p.deterministic and p.repeatable is False:
            return Outcome(NOT_REPEATABLE, p.kind, p.message)
    if result.status == STATUS_OK and result.passes:
        return Outcome(PASS)
    return Outcome(OTHER, "", result.message or result.status)


# ---- valid candidates ------------------------------------------------------------------------
def off(f: Field) -> Any:
    """A field's value when its option is off: the first choice (none, fp16, BSHD, auto), a
    switch off, an optional number or lengths none, else the declared default."""
    if isinstance(f, Choice):
        return f.choices[0]
    if isinstance(f, Switch):
        return False
    if isinstance(f, Lengths) or "none" in f.meta:
        return None
    return f.default


OPTIONS = tuple(f for f in FIELDS if f.name not in SHAPE)  # the options tried off in turn, in order


def _largest_divisor(n: int, most: int) -> int:
    return max(d for d in range(1, min(n, most) + 1) if n % d == 0)


def _resized(lens: tuple[int, ...] | None, b: int, s: int) -> tuple[int, ...] | None:
    if lens is None:
        return None
    lens = tuple(min(x, s) for x in lens[:b])
    return lens + (s,) * (b - len(lens))


def fit(c: SdpaConfig) -> SdpaConfig:
    """`c` with what follows from its sizes and options made to agree: lengths one per batch entry
    within their side (both sides or neither), the window and the page within s_kv, h_kv a divisor
    of h_q, no deterministic without the backward, O's dtype the inputs' unless FP8, and the values
    that mean nothing off (page order without pages, dropout seed without dropout) at their off."""
    changes: dict[str, Any] = {"h_kv": _largest_divisor(c.h_q, c.h_kv)}
    q, kv = _resized(c.seq_lens_q, c.b, c.s_q), _resized(c.seq_lens_kv, c.b, c.s_kv)
    changes.update(seq_lens_q=q if kv is not None else None, seq_lens_kv=kv if q is not None else None)
    if c.window is not None:
        changes["window"] = min(c.window, c.s_kv)
    if c.page_size is not None:
        changes["page_size"] = min(c.page_size, c.s_kv)
    else:
        changes["page_order"] = off(FIELD["page_order"])
    if not c.backward:
        changes["deterministic"] = False
    if not c.dropout:
        changes["dropout_seed"] = FIELD["dropout_seed"].default
    if not c.fp8 and c.out_dtype not in ("auto", c.dtype):
        changes["out_dtype"] = "auto"
    return c.replace(**changes)


def valid(c: SdpaConfig) -> bool:
    return not validate(c)


def _option_candidates(c: SdpaConfig, f: Field) -> list[Any]:
    """Simpler values of one option: off, then for a choice those declared before it, for
    lengths every entry full (a padding mask that masks nothing)."""
    value = getattr(c, f.name)
    values = [off(f)]
    if isinstance(f, Choice) and value in f.choices:
        values += list(f.choices[1 : f.choices.index(value)])
    if isinstance(f, Lengths) and value is not None:
        values.append((getattr(c, f.meta["size"]),) * c.b)
    if f.name == "inputs":
        values += _recipe_candidates(value)
    return [v for v in dict.fromkeys(values) if v != value]


def _recipe_candidates(text: str) -> list[str]:
    """An input recipe with one of its items left out at a time (its seed kept: the same draws)."""
    from ..model.inputs import DEFAULT, parse_inputs

    try:
        recipe = parse_inputs(text)
    except ValueError:
        return []
    return [
        dataclasses.replace(recipe, **{f.name: getattr(DEFAULT, f.name)}).text
        for f in dataclasses.fields(recipe)
        if f.name != "seed" and getattr(recipe, f.name) != getattr(DEFAULT, f.name)
    ]


def _least(name: str) -> int:
    return HEAD_DIM_STEP if name in ("d_qk", "d_v") else 1


def size_candidates(c: SdpaConfig, name: str) -> list[int]:
    """Smaller values of one size, smallest first: its least, the powers of two below it, its
    remainder modulo 128 (and 64), and 128 and 256 below it; head dims in multiples of 8, heads
    as divisors or multiples of the other side's."""
    x, least = getattr(c, name), _least(name)
    if name == "h_kv":
        return [d for d in range(1, x) if c.h_q % d == 0]
    if name == "h_q":
        return list(range(c.h_kv, x, c.h_kv))
    values = {least, x // 2, x % PERIOD, x % (PERIOD // 2), x - PERIOD, x - 2 * PERIOD}
    values |= {1 << k for k in range(x.bit_length())}
    step = HEAD_DIM_STEP if name in ("d_qk", "d_v") else 1
    return sorted(v for v in values if least <= v < x and v % step == 0)


# ---- the steps -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """A configuration to run for the shrinker: a candidate, a confirmation of the minimal one
    (the hunt runs those with peers, for whose bug it is), or a boundary neighbour run again."""

    config: SdpaConfig
    purpose: str  # CANDIDATE, CONFIRM, BOUNDARY
    fresh: bool  # in a fresh engine process (each of a crash's runs)
    words: str  # the change it tries, as the progress line says it


CANDIDATE, CONFIRM, BOUNDARY = "candidate", "confirm", "boundary"


@dataclass(frozen=True)
class Neighbour:
    """A configuration next to the minimal one, one change away, that passes."""

    change: str  # "bias none", "s_kv 255"
    config: SdpaConfig
    confirmed: bool  # it passed twice


@dataclass(frozen=True)
class Shrunk:
    start: SdpaConfig
    failure: Outcome
    minimal: SdpaConfig
    signature: tuple[tuple[str, str], ...]  # (field, value as typed) without which it passes
    boundary: tuple[Neighbour, ...]
    confirmed: bool  # the minimal configuration failed the same way on two more runs
    runs: int
    stopped: str = ""  # why shrinking stopped before its end ('' when it ran to it)


Steps = Generator[Probe, Outcome, Shrunk]


class _Shrinker:
    """The state of one shrink: the smallest failing configuration so far, every outcome seen."""

    def __init__(self, start: SdpaConfig, failure: Outcome, halt: Callable[[], str]) -> None:
        self.current, self.failure, self.halt = start, failure, halt
        self.seen: dict[SdpaConfig, Outcome] = {start: failure}
        self.runs, self.stopped = 0, ""
        self.fresh = failure.kind == CRASH

    def ask(self, c: SdpaConfig, words: str, purpose: str = CANDIDATE) -> Generator[Probe, Outcome, Outcome]:
        if purpose == CANDIDATE and c in self.seen:
            return self.seen[c]
        if why := self.stopped or self.halt():
            self.stopped = why
            return Outcome(OTHER, "", f"not run: {why}")
        outcome = yield Probe(c, purpose, self.fresh, words)
        self.runs += 1
        if purpose == CANDIDATE:
            self.seen[c] = outcome
        return outcome

    def fails(self, outcome: Outcome) -> bool:
        return outcome.failed and outcome.same(self.failure)

    def try_change(self, changes: dict[str, Any], words: str) -> Generator[Probe, Outcome, Outcome | None]:
        """Run `current` with `changes` (made to fit), kept if it fails the same way; its outcome,
        None where the candidate is no new valid configuration."""
        c = fit(self.current.replace(**changes))
        if c == self.current or not valid(c):
            return None
        outcome = yield from self.ask(c, words)
        if self.fails(outcome):
            self.current = c
        return outcome

    def sizes(self) -> Generator[Probe, Outcome, bool]:
        """Each size to its first smaller value that still fails, then bisected toward the
        largest smaller one that ran and did not fail so."""
        moved = False
        for name in SIZES:
            below: int | None = None  # the largest value tried below the kept one, which did not fail so
            for v in size_candidates(self.current, name):
                outcome = yield from self.try_change({name: v}, f"{name} {v}")
                if outcome is not None and self.fails(outcome):
                    moved = True
                    break
                if outcome is not None and outcome.kind != OTHER:
                    below = v
            moved |= yield from self._bisect(name, below)
        return moved

    def _bisect(self, name: str, below: int | None) -> Generator[Probe, Outcome, bool]:
        """Between a value that ran without this failure and the failing one, the least that still fails."""
        step, moved = _step(name), False
        if below is None or name in ("h_q", "h_kv"):
            return False
        while getattr(self.current, name) - below > step and not self.stopped:
            mid = (below + getattr(self.current, name)) // 2 // step * step
            if mid <= below:
                break
            outcome = yield from self.try_change({name: mid}, f"{name} {mid}")
            if outcome is None:
                break
            if self.fails(outcome):
                moved = True
            else:
                below = mid
        return moved

    def options(self) -> Generator[Probe, Outcome, bool]:
        """Each option off, else simpler; the first change that still fails is kept."""
        moved = False
        for f in OPTIONS:
            for v in _option_candidates(self.current, f):
                outcome = yield from self.try_change({f.name: v}, f"{f.name} {f.format(v) or 'none'}")
                if outcome is not None and self.fails(outcome):
                    moved = True
                    break
        return moved

    def neighbours(self) -> list[tuple[str, str, SdpaConfig]]:
        """The minimal configuration one change away, as (field, the change, the configuration):
        each option that is on turned off, each size one step smaller; the valid ones."""
        c, out = self.current, []
        for f in OPTIONS:
            if getattr(c, f.name) != off(f):
                out.append((f.name, f"{f.name} {f.format(off(f)) or 'none'}", c.replace(**{f.name: off(f)})))
        for name in SIZES:
            smaller = (
                size_candidates(c, name) if name in ("h_q", "h_kv") else [getattr(c, name) - _step(name)]
            )
            if smaller and smaller[-1] >= _least(name):
                out.append((name, f"{name} {smaller[-1]}", c.replace(**{name: smaller[-1]})))
        fitted = [(name, words, fit(n)) for name, words, n in out]
        return [(name, words, n) for name, words, n in fitted if n != c and valid(n)]


def _step(name: str) -> int:
    return HEAD_DIM_STEP if name in ("d_qk", "d_v") else 1


def _go_on() -> str:
    return ""


def shrinking(start: SdpaConfig, failure: Outcome, halt: Callable[[], str] = _go_on) -> Steps:
    """The steps of shrinking `start`, which failed as `failure`: yields Probes, is sent each
    one's Outcome, returns the Shrunk. `halt` says why no other run may start ('' while one may)."""
    s = _Shrinker(start, failure, halt)
    for _ in range(MAX_ROUNDS):
        moved = yield from s.sizes()
        moved |= yield from s.options()
        if not moved or s.stopped:
            break
    signature: list[tuple[str, str]] = []
    boundary: list[Neighbour] = []
    for name, words, n in s.neighbours():
        first = s.seen.get(n) or (yield from s.ask(n, words))
        if first.kind != PASS:
            continue  # refused or not run: no boundary
        again = yield from s.ask(n, words, BOUNDARY)
        boundary.append(Neighbour(words, n, again.kind == PASS))
        signature.append((name, FIELD[name].format(getattr(s.current, name))))
    confirmed = True
    for n in (1, 2):
        outcome = yield from s.ask(s.current, f"the minimal configuration, run {n} of 2", CONFIRM)
        confirmed = confirmed and s.fails(outcome)
    order = {f.name: i for i, f in enumerate(FIELDS)}
    return Shrunk(start, failure, s.current, tuple(sorted(signature, key=lambda e: order[e[0]])),
                  tuple(boundary), confirmed, s.runs, s.stopped)  # fmt: skip


def shrink(start: SdpaConfig, failure: Outcome, run: Callable[[Probe], Outcome],
           halt: Callable[[], str] = _go_on) -> Shrunk:  # fmt: skip
    """`shrinking` driven by a blocking `run(probe) -> Outcome` (the tests' fake engine)."""
    steps = shrinking(start, failure, halt)
    try:
        probe = next(steps)
        while True:
            probe = steps.send(run(probe))
    except StopIteration as done:
        return done.value


def matches(config: SdpaConfig, failure: Outcome, shrunk: Shrunk) -> bool:
    """Whether a failing draw falls in an already shrunk class (so it need not be shrunk again):
    it fails the same way, every size of the signature is at least as large, every choice at or
    past the signature's in its declared order (a bias of any shape past 1x1), every other option
    of it on."""
    if not failure.same(shrunk.failure):
        return False
    for name, _text in shrunk.signature:
        f, mine, theirs = FIELD[name], getattr(config, name), getattr(shrunk.minimal, name)
        if name in ("h_q", "h_kv"):  # grouped heads or not, as the minimal configuration
            inside = mine >= theirs and (config.h_q != config.h_kv) == (
                shrunk.minimal.h_q != shrunk.minimal.h_kv
            )
        elif name in SIZES:
            inside = mine >= theirs
        elif isinstance(f, Choice) and mine in f.choices and theirs in f.choices:
            inside = f.choices.index(mine) >= f.choices.index(theirs)
        else:
            inside = mine != off(f)
        if not inside:
            return False
    return True
