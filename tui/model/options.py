"""A run's options besides the configuration: timing, autotune, the check, the seed, peers, the
plan cache and the run history. Each is declared once (OPTIONS): the CLI's flags and which commands
take them, the form's widgets, `options_from()` and what a saved kernel time says of them follow
from the declaration, the defaults from the dataclasses below. Declared here, below the engine, so
that the dashboard and the CLI, which only send them, do not import the engine's measurement code."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from .config import SEED_MAX, FieldError
from .fields import quote
from .statuses import REGIME_BURST, REGIMES

# The peers a run may time beside cuDNN, in the order they are shown (engine/peers.py adapts each).
PEER_KEYS = ("flash", "efficient", "cudnn", "math", "flex", "fa3", "fa4", "flashinfer")
MAX_REPLAYS = 10_000  # at the 2 ms a replay aims for, 20 s of timing: more only waits longer
# The commands' groups of run options (Option.cli): those of every command that measures (run,
# check, sweep), and those of the commands that time plans (run, sweep).
MEASURED, PLANS = "measured", "plans"


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
    no_history: bool = False  # keep the results out of the run history (the commands' --no-history)
    cross_check: bool = False  # also check each output against an independent fp64 reference
    retire_after: bool = False  # the engine process exits after answering: the next run is in a fresh one

    def problems(self) -> list[FieldError]:
        """What a run cannot take, said at the option: a seed torch's generator cannot hold, a
        count of replays past any use."""
        problems = [
            FieldError(o.name, words)
            for o in OPTIONS
            if o.bounds and (words := o.problem(getattr(self.timing if o.timing else self, o.name)))
        ]
        unknown = [quote(p) for p in self.peers if p not in PEER_KEYS]
        if unknown:
            problems.append(
                FieldError(
                    "peers", f"unknown peer {', '.join(unknown)}: the peers are {', '.join(PEER_KEYS)}"
                )
            )
        return problems

    def with_timing(self, **changes: Any) -> RunOptions:
        return dataclasses.replace(self, timing=dataclasses.replace(self.timing, **changes))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        d = dict(data)
        d["timing"] = TimingOptions(**d.get("timing", {}))
        d["peers"] = tuple(d.get("peers", ()))
        return cls(**d)


@dataclass(frozen=True)
class Option:
    """One run option: its attribute (of RunOptions, or of its TimingOptions when `timing`), the
    CLI's flag (a switch names both ways), what it means, and the form's words for it ('' where
    the form leaves it to the CLI)."""

    name: str
    flag: str
    help: str
    kind: str = "switch"  # switch | int | choice | peers
    form: str = ""
    tip: str = ""  # the form's tooltip
    timing: bool = False
    choices: tuple[str, ...] = ()
    bounds: tuple[int, int] | None = None  # an int option's lowest and highest values
    cli: str = ""  # the commands' group that takes it (MEASURED, PLANS); '' where a command adds it alone
    recorded: str = ""  # the kernel time's field that says the value it was measured under

    @property
    def default(self) -> Any:
        return getattr(TimingOptions() if self.timing else RunOptions(), self.name)

    def problem(self, value: Any) -> str:
        """Why an int option cannot take `value`; '' when it can."""
        low, high = self.bounds or (-math.inf, math.inf)
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return ""
        return f"{self.name} must be a whole number from {low} to {high} (got {quote(value)})"


REGIME_HELP = (
    "burst: a short run on a rested GPU (published tables); sustained: timed after 2 s of load (a "
    "training step)"
)
# In the commands' order (each group's, as cli/options.py adds them); the form shows its choice
# first, then its ticks in this order (FORM_OPTIONS), as it does the fields'.
OPTIONS: tuple[Option, ...] = (
    Option(
        "replays",
        "--replays",
        f"timed replays of the CUDA graph (1 to {MAX_REPLAYS})",
        "int",
        timing=True,
        bounds=(1, MAX_REPLAYS),
        cli=MEASURED,
    ),  # fmt: skip
    Option(
        "l2_flush",
        "--l2-flush/--no-l2-flush",
        "flush the L2 before each execution (cold-cache kernel time)",
        form="flush L2 each time",
        tip="flush the L2 before each execution: cold-cache kernel time",
        timing=True,
        cli=MEASURED,
        recorded="l2_flushed",
    ),  # fmt: skip
    Option(
        "autotune",
        "--autotune/--no-autotune",
        "time every plan, not only the heuristic's",
        form="time every plan",
        tip="autotune: time every plan that builds, not only the heuristic's pick",
        cli=PLANS,
    ),  # fmt: skip
    Option(
        "peers",
        "--peers",
        "also time and check these peers on the same tensors: all, or a list of " + ", ".join(PEER_KEYS),
        "peers",
        form="peers timed beside cuDNN",
        tip="also time and check this peer on the same tensors, beside cuDNN (GPU only; F1 says what each is)",
    ),  # fmt: skip
    Option(
        "regime",
        "--regime",
        REGIME_HELP + ". Default: the preset's, else burst",
        "choice",
        form="regime",
        tip=REGIME_HELP.replace("(a training step)", "(what a training step sees)"),
        timing=True,
        choices=REGIMES,
        cli=MEASURED,
        recorded="regime",
    ),  # fmt: skip
    Option(
        "seed",
        "--seed",
        "random seed of the inputs (0 to 2**63-1)",
        "int",
        bounds=(0, SEED_MAX),
        cli=MEASURED,
    ),
    Option(
        "run_anyway",
        "--run-anyway",
        "run a configuration that matches a known issue (it may crash the engine process)",
        form="run known issues",
        tip="a configuration that matches a known issue (it may crash cuDNN) runs only when ticked",
        cli=MEASURED,
    ),  # fmt: skip
    Option(
        "plan_cache",
        "--cache/--no-cache",
        "load plans built before from the plan cache on disk "
        "(`cache` shows it); --no-cache builds every plan",
        cli=MEASURED,
    ),  # fmt: skip
    Option("check", "--check/--no-check", "compare with the fp32 reference", cli=PLANS),
    Option(
        "cross_check",
        "--cross-check/--no-cross-check",
        "also check cuDNN and the fp32 reference against an fp64 reference computed independently "
        "(says whose a mismatch is)",
        cli=PLANS,
    ),  # fmt: skip
    Option("no_history", "--no-history", "do not keep the results in the history"),
)
OPTION = {o.name: o for o in OPTIONS}
FORM_OPTIONS = tuple(sorted((o for o in OPTIONS if o.form), key=lambda o: o.kind != "choice"))


def options_from(values: dict[str, Any], base: RunOptions | None = None) -> RunOptions:
    """RunOptions from values by option name (the CLI's parameters, the form's widgets) over
    `base`: those of TimingOptions into its timing; names that are no option are left alone."""
    base = base or RunOptions()
    given = {o.name: values[o.name] for o in OPTIONS if values.get(o.name) is not None}
    timing = {k: v for k, v in given.items() if OPTION[k].timing}
    run = {k: tuple(v) if k == "peers" else v for k, v in given.items() if not OPTION[k].timing}
    return dataclasses.replace(base, timing=dataclasses.replace(base.timing, **timing), **run)


def measured_under(timing: Any) -> dict[str, Any]:
    """The options a kernel time (results.TimingStats) says it was measured under, by name."""
    return {o.name: getattr(timing, o.recorded) for o in OPTIONS if o.recorded}


def option_values(options: RunOptions) -> dict[str, Any]:
    """Each option's value in `options`, by name: what the form shows of them."""
    return {o.name: getattr(options.timing if o.timing else options, o.name) for o in OPTIONS}
