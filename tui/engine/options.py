"""A run's options besides the configuration: timing, autotune, the check, the seed, peers and
the plan cache. Apart from the engine (tui.engine.runner) so that the dashboard, which only sends
them, does not import the engine's measurement code at its start."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .config import SEED_MAX, FieldError
from .fields import quote
from .timing import TimingOptions


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
        from .peers import PEER_KEYS

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
