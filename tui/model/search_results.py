"""What a knob search found, as a plain record that crosses the engine-process boundary and is
written as JSON and CSV: every candidate tried, the spaces searched, the heuristic's pick, the
best found, the fastest peer, and why the search ended."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from .config import SdpaConfig
from .fields import config_from_dict
from .knob_search import (
    BUILD_FAILED,
    BUILT,
    CHECK_FAILED,
    CRASHED,
    HEURISTIC,
    PINNED,
    EngineSpace,
    Trial,
    fastest,
    ranked_us,
    trying,
)
from .results import Environment, PeerResult, RunResult
from .statuses import STATUS_CRASH, STATUS_OK

MAX_CRASHES = 3  # candidates that may crash an engine process before a search gives up
SEARCH_SCHEMA = "1.1"  # 1.1: placements_us of the confirmed, the fresh process's run (1.0 still loads)
CSV_COLUMNS = ("preset", "plan", "name", "origin", "status", "median_us", "p10_us", "p90_us", "replay_us",
               "kernels", "max_abs_error", "seconds", "error")  # fmt: skip


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)


def parse_budget(text: str) -> float:
    """'60s', '2m', '90' -> seconds; ValueError says what a budget looks like."""
    m = _DURATION.match(text or "")
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"a budget is a positive duration such as 60s, 2m or 90 (got {text!r})")
    unit = (m.group(2) or "s").lower()[0]
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[unit]


@dataclass(frozen=True)
class SearchOptions:
    budget_s: float = 60.0  # the search's own time: building, checking and timing candidates
    peers: tuple[str, ...] = ("flash", "efficient")  # peers timed beside, for the comparison
    seed: int = 0  # the random draws' seed (and the inputs')
    confirm: int = 3  # the best few found, timed again beside the heuristic's pick at full replays
    # going on after a crash, in a fresh engine process (after_crash): what was found, kept as found
    resume: tuple[Trial, ...] = ()
    spent_s: float = 0.0  # of the budget, before
    crashes: tuple[str, ...] = ()  # each candidate that crashed an engine process, and how

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchOptions:
        d = dict(d)
        d["peers"] = tuple(d.get("peers", ()))
        d["resume"] = tuple(Trial.from_dict(t) for t in d.get("resume", ()))
        d["crashes"] = tuple(d.get("crashes", ()))
        return cls(**d)


def forward_of(config: SdpaConfig) -> SdpaConfig:
    """The forward a search times: a training step's forward writes its softmax stats, as there."""
    if not config.backward:
        return config
    softmax = "stats" if config.softmax_out == "none" else config.softmax_out
    return config.replace(backward=False, deterministic=False, softmax_out=softmax)


@dataclass(frozen=True)
class FreshRun:
    """The contender (SearchResult.contender), pinned, run beside the heuristic's pick in an engine
    process of its own (the search's retires after it): the figures a pinned run reads, which a
    search's process, full of what it built, may not (the decode pin read 160-162 µs there, 155
    µs fresh, on the H200). `best_us` is the contender's time."""

    plan: str
    pick_us: float | None = None
    best_us: float | None = None
    message: str = ""  # why there are no figures

    @property
    def gain_pct(self) -> float | None:
        if not self.pick_us or self.best_us is None:
            return None
        return (self.pick_us - self.best_us) / self.pick_us * 100


def fresh_config(r: SearchResult) -> SdpaConfig | None:
    """The configuration that runs the contender in a fresh process: the searched forward, pinned
    to it; None where no other plan passed or the search was stopped."""
    other = r.contender
    if r.status != "ok" or other is None:
        return None
    return forward_of(r.config).replace(plan=other.plan)


def with_fresh(r: SearchResult, run: RunResult) -> SearchResult:
    """The search's record with what `run` (of fresh_config(r)) measured of the pin and the pick."""
    plan = r.contender.plan if r.contender is not None else ""
    forward = run.forward if run.passes else None
    if run.status != STATUS_OK or forward is None:
        return dataclasses.replace(r, fresh=FreshRun(plan, message=run.message or run.status))
    pinned, pick = forward.plan(forward.pinned_plan), forward.plan(forward.heuristic_plan)
    if pinned is None or pinned.timing is None:
        words = next((n for n in forward.notes if "pinned plan" in n), "the pinned plan was not timed")
        return dataclasses.replace(r, fresh=FreshRun(plan, message=words))

    def us(p: Any) -> float | None:
        t = p.timing if p is not None else None
        return ranked_us(t.median_us, t.replay_us, t.kernels_per_call) if t is not None else None

    return dataclasses.replace(r, fresh=FreshRun(plan, us(pick), us(pinned)))


def after_crash(
    options: SearchOptions, result: SearchResult, step: str, elapsed_s: float
) -> SearchOptions | None:
    """How a search whose engine process crashed under a candidate goes on in a fresh one: what
    it found kept, the candidate marked as crashed (never tried again), the budget less the time
    spent. None when it did not crash, nothing says which candidate it was, or after MAX_CRASHES."""
    if result.status != STATUS_CRASH or len(options.crashes) >= MAX_CRASHES:
        return None
    crashed = next((t for t in reversed(result.trials) if t.status == CRASHED), None)
    found = result.searched()
    if crashed is None:  # the process died with what it found: only the candidate is known
        pin = trying(step)
        if pin is None:
            return None
        crashed = Trial(pin.text(), CRASHED, error=result.message)
        found = (*options.resume, crashed)
    return dataclasses.replace(options, resume=tuple(found), spent_s=options.spent_s + elapsed_s,
                               crashes=(*options.crashes, f"{crashed.plan}: {crashed.error or result.message}"))  # fmt: skip


@dataclass(frozen=True)
class SearchResult:
    config: SdpaConfig
    status: str  # ok, or a RunResult status that says why nothing was searched
    message: str = ""
    budget_s: float = 0.0
    elapsed_s: float = 0.0
    stopped: str = ""  # why the search ended (knob_search.STOP_*), or the fault that ended it
    pick_plan: str = ""  # the heuristic's pick, as a pin's text
    skipped: tuple[str, ...] = ()  # engines not searched, and why (cuDNN's knob query refused them)
    crashes: tuple[str, ...] = ()  # candidates that crashed an engine process (the search went on)
    spaces: tuple[EngineSpace, ...] = ()
    trials: tuple[Trial, ...] = ()  # the heuristic's plans first, then every candidate in the order tried
    confirmed: tuple[Trial, ...] = ()  # the pick and the best found, timed again side by side
    peers: tuple[PeerResult, ...] = ()
    environment: Environment | None = None
    preset: str = ""
    fresh: FreshRun | None = None  # the best found run again in a fresh engine process (with_fresh)
    schema_version: str = SEARCH_SCHEMA

    @property
    def pick(self) -> Trial | None:
        """The plan a run uses without a pin: the heuristic's first that built (as confirmed)."""
        found = [
            t for t in (*self.confirmed, *self.trials) if t.plan == self.pick_plan and t.origin == HEURISTIC
        ]
        return found[0] if found else None

    @property
    def best(self) -> Trial | None:
        """The fastest that passed: from the confirmation where there was one, else as searched."""
        return fastest(self.confirmed) or fastest(self.trials)

    @property
    def contender(self) -> Trial | None:
        """The plan run pinned in a fresh process: the best found where the search found it (not one
        of the heuristic's plans), else the fastest the search found that passed the confirmation. A
        process full of a search's builds can slow one plan more than another (on the H200,
        KERNEL_CFG=27 read 158 µs searched, 164 confirmed beside the pick's 164, 160 pinned fresh)."""
        best = self.best
        if best is not None and best.origin != HEURISTIC:
            return best
        return fastest([t for t in self.confirmed if t.origin != HEURISTIC])

    @property
    def to_pin(self) -> Trial | None:
        """The plan worth pinning, or None where the pick is as fast as anything found. Where the
        contender ran in a fresh process, that run decides (a pin runs in a fresh process, and the
        search's own can slow one plan more than another); else the best found, if not the pick."""
        f = self.fresh
        if f is not None and f.gain_pct is not None:
            found = [t for t in (*self.confirmed, *self.trials) if t.plan == f.plan and t.passed]
            return found[0] if f.gain_pct > 0 and found else None
        best = self.best
        return best if best is not None and best.plan != self.pick_plan else None

    @property
    def kept(self) -> Trial | None:
        """What a pin of this search keeps (--save-preset, the pane's p): the plan worth pinning, else
        the pick itself; None where nothing passed."""
        if self.best is None:
            return None
        return self.to_pin or self.pick or self.best

    @property
    def gain_pct(self) -> float | None:
        pick, best = self.pick, self.best
        if pick is None or best is None or not pick.time_us or best.time_us is None:
            return None
        return (pick.time_us - best.time_us) / pick.time_us * 100

    def gain_range(self) -> tuple[float, float] | None:
        """The least and the most the best gained on the pick over the confirmation's places of the
        inputs in memory (both timed side by side at each); None where there were not several."""
        pick, best = self.pick, self.best
        if pick is None or best is None or best.plan == self.pick_plan:
            return None
        at_pick, at_best = pick.placements_us, best.placements_us
        if len(at_pick) < 2 or len(at_pick) != len(at_best):
            return None
        gains = [(p - b) / p * 100 for p, b in zip(at_pick, at_best, strict=True) if p]
        return (min(gains), max(gains)) if gains else None

    @property
    def best_peer(self) -> PeerResult | None:
        ran = [p for p in self.peers if p.ran and p.timing is not None]
        return min(ran, key=lambda p: p.timing.median_us) if ran else None  # type: ignore[union-attr]

    def searched(self) -> tuple[Trial, ...]:
        return tuple(t for t in self.trials if t.origin not in (HEURISTIC, PINNED))

    def counts(self) -> dict[str, int]:
        """Of the candidates searched: tried, built, failed to build, failed the check."""
        s = self.searched()
        return {
            "tried": len(s),
            "built": sum(t.status != BUILD_FAILED for t in s),
            "build failed": sum(t.status == BUILD_FAILED for t in s),
            "check failed": sum(t.status == CHECK_FAILED for t in s),
            "crashed": sum(t.status == CRASHED for t in s),
            "passed": sum(t.status == BUILT and t.median_us is not None for t in s),
        }

    def faster_but_wrong(self) -> tuple[Trial, ...]:
        """Candidates that ran faster than the best right one but failed the check: findings."""
        best = self.best
        return tuple(
            t for t in self.trials
            if t.status == CHECK_FAILED and t.time_us is not None and best and t.time_us < (best.time_us or 0)
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["config"] = self.config.to_dict()
        d["spaces"] = [s.to_dict() for s in self.spaces]
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchResult:
        from .results import timing_from_dict

        d = dict(data)
        d["config"] = config_from_dict(d["config"])
        d["spaces"] = tuple(EngineSpace.from_dict(s) for s in d.get("spaces", ()))
        d["trials"] = tuple(Trial.from_dict(t) for t in d.get("trials", ()))
        d["confirmed"] = tuple(Trial.from_dict(t) for t in d.get("confirmed", ()))
        d["skipped"] = tuple(d.get("skipped", ()))
        d["crashes"] = tuple(d.get("crashes", ()))
        d["peers"] = tuple(
            PeerResult(**{**p, "timing": timing_from_dict(p.get("timing"))}) for p in d.get("peers", ())
        )
        d["environment"] = Environment(**d["environment"]) if d.get("environment") else None
        d["fresh"] = FreshRun(**d["fresh"]) if d.get("fresh") else None
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def csv_rows(self) -> list[dict[str, Any]]:
        return [
            {"preset": self.preset, **{k: getattr(t, k) for k in CSV_COLUMNS if k != "preset"}}
            for t in self.trials
        ]


__all__ = ["BUILT", "CSV_COLUMNS", "SearchOptions", "SearchResult"]
