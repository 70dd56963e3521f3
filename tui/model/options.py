"""A run's options besides the configuration: timing, autotune, the check, the seed, peers and
the plan cache. Declared here, below the engine, so that the dashboard and the CLI, which only
send them, do not import the engine's measurement code."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .config import SEED_MAX, FieldError
from .fields import quote
from .statuses import REGIME_BURST

# The peers a run may time beside cuDNN, in the order they are shown (engine/peers.py adapts each).
PEER_KEYS = ("flash", "efficient", "cudnn", "math", "flex", "fa3", "flashinfer")


@dataclass(frozen=True)
class TimingOptions:
    replays: int = 20  # timed replays of the graph; the statistics are over these
    target_replay_ms: float = 2.0  # choose executions per replay so one replay lasts about this
    max_per_replay: int = 200
    min_per_replay: int = 3
    warmup: int = 3
    l2_flush: bool = False
    regime: str = REGIME_BURST
    rest_max_s: float = 2.0  # burst: the longest wait for a rested GPU
    # burst: the timed replays together last about this long. On the H200 an 8k-context kernel
    # (1.7 ms) ran at full clock for the first ~40 ms, then power-capped at 1.95 ms: a burst
    # that outlasts that window reads the cap, not the burst.
    burst_ms: float = 40.0
    sustain_s: float = 2.0  # sustained: how long the plan runs before it is timed


@dataclass(frozen=True)
class RunOptions:
    timing: TimingOptions = field(default_factory=TimingOptions)
    autotune: bool = True  # time every plan that builds, not only the heuristic's pick
    check: bool = True  # compare with the fp32 reference
    seed: int = 0  # the inputs' random seed, 0 to SEED_MAX (the CLI's --seed)
    run_anyway: bool = False  # run a configuration that matches a known issue (known_issues.py)
    peers: tuple[str, ...] = ()  # other ways to compute the forward, timed beside it (peers.PEER_KEYS)
    plan_cache: bool = True  # load plans built before from the plan cache on disk, and add new ones

    def problems(self) -> list[FieldError]:
        """What a run cannot take, said at the option: a seed torch's generator cannot hold."""
        problems = []
        seed = self.seed
        if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= SEED_MAX):
            words = f"the seed must be a whole number from 0 to {SEED_MAX} (got {quote(seed)})"
            problems.append(FieldError("seed", words))
        unknown = [quote(p) for p in self.peers if p not in PEER_KEYS]
        if unknown:
            problems.append(
                FieldError(
                    "peers", f"unknown peer {', '.join(unknown)}: the peers are {', '.join(PEER_KEYS)}"
                )
            )
        return problems

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        d = dict(data)
        d["timing"] = TimingOptions(**d.get("timing", {}))
        d["peers"] = tuple(d.get("peers", ()))
        return cls(**d)
