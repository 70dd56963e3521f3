"""Immutable records of what the engine measured, and their JSON form.

A run is a list of passes (the forward, and for a training step the backward; later others),
each measured the same way: its build phases, plans, kernel time and the check of each output
it writes. Everything the CLI prints and the dashboard draws is one of these records. They hold
plain numbers and strings only (no tensors, no cuDNN objects) so they can cross a process
boundary and be written to disk. `SCHEMA_VERSION` changes whenever a field's meaning changes;
files of an older major version are upgraded when read, a newer major version is refused.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .config import SdpaConfig, format_bytes
from .records import ResultError, kind_of, read_record
from .results_v1 import upgrade_v1
from .statuses import FORWARD, GOOD_STATUSES, SCHEMA_VERSION, STATUS_OK


@dataclass(frozen=True)
class PhaseTiming:
    name: str
    seconds: float
    note: str = ""  # what this phase really does in the installed frontend
    ok: bool = True
    error: str = ""


@dataclass(frozen=True)
class GpuState:
    """What NVML says of the GPU at one moment: clocks, power against the enforced limit,
    temperature, and the clock-event (throttle) reasons active then."""

    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: int | None = None
    reasons: tuple[str, ...] = ()  # e.g. ("sw power cap",); empty when none is active


@dataclass(frozen=True)
class Telemetry:
    """The GPU's state around one timed measurement, and how much of it ran capped: the growth
    of NVML's violation counters (time spent power- or thermally-capped) over its duration."""

    before: GpuState
    after: GpuState
    seconds: float  # how long the measurement took, the share's denominator
    power_capped_pct: float | None = None
    thermal_capped_pct: float | None = None
    rest_wait_s: float = 0.0  # burst: how long it waited for the GPU to rest first
    rested: bool | None = None  # burst: False when the wait ran out with a cap still active

    @property
    def capped_words(self) -> str:
        """One short phrase for the headline when capping mattered ('' when it did not)."""
        parts = [
            f"{what}-capped {pct:.0f}%"
            for what, pct in (("power", self.power_capped_pct), ("thermally", self.thermal_capped_pct))
            if pct is not None and pct >= 1.0
        ]
        if self.rested is False:
            parts.append(f"not rested after {self.rest_wait_s:.1f} s")
        return ", ".join(parts)


@dataclass(frozen=True)
class TimingStats:
    """Kernel time of one plan per execution: the durations CUPTI records for the plan's
    kernels while a CUDA graph of `per_replay` executions is replayed `replays` times."""

    median_us: float
    min_us: float
    max_us: float
    p10_us: float
    p90_us: float
    stdev_us: float
    replays: int
    per_replay: int
    l2_flushed: bool
    method: str = "cupti"
    replay_us: float | None = None  # GPU time per execution in the graph, gaps between kernels included
    kernels_per_call: int | None = None
    regime: str = ""  # burst or sustained ('' in files older than 2.1: not said)
    samples_us: tuple[float, ...] = ()  # each replay's time per execution, in replay order
    stable: bool | None = None  # p90/p10 within STABLE_RATIO (None: too few samples to say)
    retried: bool = False  # the first measurement was unstable and this is the second
    l2_flush_bytes: int | None = None  # the buffer written before each execution, when flushed
    cross_check: str = ""  # replay time against the kernel sum, when they disagree
    telemetry: Telemetry | None = None  # None where NVML is not available

    @property
    def spread_pct(self) -> float:
        return 100.0 * (self.p90_us - self.p10_us) / self.median_us if self.median_us else 0.0

    @property
    def l2_state(self) -> str:
        """'flushed' or 'warm': how each execution found the L2 (what the headline says of it)."""
        return "flushed" if self.l2_flushed else "warm"

    @property
    def regime_words(self) -> str:
        """What the headline says after a figure: its regime, stability and capping."""
        words = [self.regime] if self.regime else []
        if self.stable is False:
            words.append(f"unstable (p90/p10 {self.p90_us / self.p10_us:.3f})" if self.p10_us else "unstable")
        if self.telemetry is not None and self.telemetry.capped_words:
            words.append(self.telemetry.capped_words)
        return ", ".join(words)


def l2_words(t: TimingStats) -> str:
    """'warm', or 'flushed, 100.0 MiB before each execution'."""
    flushed = f", {format_bytes(t.l2_flush_bytes)} before each execution" if t.l2_flush_bytes else ""
    return t.l2_state + (flushed if t.l2_flushed else "")


# Where a plan comes from: an engine of the cuDNN library, one of the frontend's open-source
# (Python) engines, or the library's own pick among engines it does not list (heur_mode.OPENSOURCE)
PLAN_SOURCES = ("backend engine", "open-source engine", "backend heuristics")


@dataclass(frozen=True)
class PlanResult:
    index: int
    name: str
    engine_id: int | None = None
    source: str = "backend engine"  # one of PLAN_SOURCES
    knobs: dict[str, int] = field(default_factory=dict)
    workspace_bytes: int | None = None
    behavior_notes: tuple[str, ...] = ()
    built: bool = False
    build_error: str = ""
    build_seconds: float | None = None
    timing: TimingStats | None = None
    tflops: float | None = None
    is_heuristic_pick: bool = False
    is_fastest: bool = False
    is_pinned: bool = False  # the config's pinned plan (`plan`), appended after the heuristic's list
    max_abs_error: float | None = None  # the worst of this plan's outputs against the fp32 reference
    matches: bool | None = None  # every output within its tolerance


@dataclass(frozen=True)
class ErrorMetrics:
    max_abs: float
    max_rel: float
    mean_abs: float
    mismatched: int  # elements outside atol + rtol * |ref|
    total: int
    nonfinite: int = 0

    @property
    def passed(self) -> bool:
        return self.mismatched == 0 and self.nonfinite == 0


@dataclass(frozen=True)
class OutputCheck:
    """One output of a pass (O, dQ, ...) against the fp32 reference on the same logical tensors:
    cuDNN's error, and each peer's on the same inputs, within one tolerance. With the cross-check
    (RunOptions.cross_check) also cuDNN's and the fp32 reference's against an fp64 reference
    computed independently, so that a disagreement says whose it is (model/whose.py)."""

    output: str
    atol: float
    rtol: float
    cudnn: ErrorMetrics | None  # None where cuDNN did not run (CPU mode)
    peers: dict[str, ErrorMetrics] = field(default_factory=dict)  # peer name -> its error
    fp64: ErrorMetrics | None = None  # cuDNN against the fp64 reference (None: not cross-checked)
    reference_fp64: ErrorMetrics | None = None  # the fp32 reference against the fp64 one

    @property
    def passed(self) -> bool | None:
        return None if self.cudnn is None else self.cudnn.passed


@dataclass(frozen=True)
class Fp8Scaling:
    """The per-tensor scales an FP8 graph read and the amax values it wrote, beside the same
    maxima of the fp32 reference (an amax the kernel computed wrongly shows here)."""

    recipe: str  # how the scales were chosen
    scales: dict[str, float] = field(default_factory=dict)  # descale_q ... scale_o (scale_dQ ...)
    amax: dict[str, float] = field(default_factory=dict)  # amax_o (amax_dq, amax_dk, amax_dv, amax_dp)
    reference_amax: dict[str, float] = field(default_factory=dict)  # max |reference| of the same tensors


@dataclass(frozen=True)
class PeerResult:
    """Another way to compute the pass (peers.py), on the same tensors: timed like a cuDNN plan,
    its error in the pass's checks under `name`; or why it did not run."""

    name: str
    description: str = ""
    reason: str = ""  # why it did not run ('' when it ran)
    timing: TimingStats | None = None
    tflops: float | None = None
    bandwidth_gbs: float | None = None
    timing_method: str = ""  # how it was timed, where not as a cuDNN plan is
    compile_seconds: float | None = None  # Flex: torch.compile's first call, apart from kernel time

    @property
    def ran(self) -> bool:
        return not self.reason

    @property
    def short(self) -> str:
        """The name without "torch" and the precision: what the headline says ("FLASH", "Flex")."""
        return self.name.removeprefix("torch ").rsplit(" ", 1)[0]


@dataclass(frozen=True)
class FormResult:
    """The pass run in an equivalent form of its configuration (model/equivalents.py): the same
    scores, planned by cuDNN afresh; its heuristic pick timed in the same regime and its outputs
    checked against the configuration's own reference; or why it did not run."""

    changes: dict[str, str]  # field -> its value in the form ("none" for no value)
    why: str  # why the form keeps the same scores
    plan: str = ""  # the form's heuristic pick
    timing: TimingStats | None = None
    tflops: float | None = None
    max_abs_error: float | None = None
    matches: bool | None = None  # every output within the configuration's tolerance (None: not checked)
    reason: str = ""  # why it did not run ('' when it ran)

    @property
    def words(self) -> str:
        """What to change: 'causal none', 'causal none, seq lengths none'."""
        return ", ".join(f"{k.replace('seq_lens_q', 'seq lengths')} {v}" for k, v in self.changes.items()
                         if k != "seq_lens_kv")  # fmt: skip


@dataclass(frozen=True)
class PassResult:
    """One measured pass: its own graph, build phases, plans, kernel time and output checks."""

    kind: str  # FORWARD, BACKWARD
    status: str = STATUS_OK
    message: str = ""
    phases: tuple[PhaseTiming, ...] = ()
    plans: tuple[PlanResult, ...] = ()
    heuristic_plan: int | None = None  # index of the plan cuDNN's heuristic would run
    fastest_plan: int | None = None  # index of the fastest plan measured
    pinned_plan: int | None = None  # index of the pinned plan, when it built: the plan this pass ran
    timing: TimingStats | None = None  # kernel time of the plan the pass ran (the pin, else the heuristic's)
    host_overhead_us: float | None = None  # host time of one execute() call
    flops: int = 0
    flops_rule: str = ""  # how the FLOPs are counted, when by convention
    io_bytes: int = 0  # minimum DRAM traffic
    tflops: float | None = None
    bandwidth_gbs: float | None = None
    reference: str = ""  # how the reference was computed ('' when not checked)
    check_device: str = ""  # where the reference (and the peers) ran: cuda or cpu
    checks: tuple[OutputCheck, ...] = ()
    peers: dict[str, str] = field(default_factory=dict)  # peer name -> what it ran
    field_peers: tuple[PeerResult, ...] = ()  # the peers asked for, timed (RunOptions.peers)
    deterministic: bool = False  # a deterministic algorithm was asked for
    repeatable: bool | None = None  # two executions wrote identical bits (None: not checked)
    fp8: Fp8Scaling | None = None
    notes: tuple[str, ...] = ()
    graph_json: str = ""
    forms: tuple[FormResult, ...] = ()  # the pass in equivalent forms of its configuration (2.6)

    @property
    def passed(self) -> bool | None:
        """Whether every output cuDNN wrote is within tolerance; None when cuDNN's were not checked."""
        verdicts = [c.passed for c in self.checks if c.passed is not None]
        return all(verdicts) if verdicts else None

    def plan(self, index: int | None) -> PlanResult | None:
        return next((p for p in self.plans if p.index == index), None)

    def autotune_verdict(self) -> str:
        return autotune_verdict(self.plans, self.heuristic_plan, self.fastest_plan)

    def worst_check(self) -> OutputCheck | None:
        """The output furthest outside its tolerance (most mismatched elements), for a message."""
        failed = [c for c in self.checks if c.passed is False]
        return max(failed, key=lambda c: (c.cudnn.mismatched, c.cudnn.nonfinite), default=None)


@dataclass(frozen=True)
class Environment:
    gpu_available: bool
    unavailable_reason: str = ""
    gpu_name: str = ""
    compute_capability: str = ""
    sm_count: int | None = None
    gpu_memory_bytes: int | None = None
    l2_bytes: int | None = None
    driver_version: str = ""
    cuda_runtime: str = ""
    torch_version: str = ""
    torch_cudnn_version: str = ""  # cuDNN as torch reports it
    cudnn_backend_version: str = ""  # cuDNN as the frontend loaded it
    frontend_version: str = ""
    python_engines: str = ""  # whether the frontend's open-source engines can run here
    telemetry: str = ""  # "NVML <driver>" where clocks and power can be read, else why not
    python_version: str = ""
    platform: str = ""
    host: str = ""
    gpu_index: int | None = None  # NVML's index of the GPU on its host (None: not known)
    gpu_uuid: str = ""
    gpu_serial: str = ""  # where the board carries one


@dataclass(frozen=True)
class Crash:
    """What a run that crashed was doing: a finding to report upstream, with the environment's
    versions and the exported script that reproduces it."""

    error: str  # CUDA's (or the operating system's) words
    during: str  # what the engine was doing: "the first execution of plan eng2_k24=32 (forward)"
    kind: str = ""  # the pass, when known
    plan: str = ""  # the plan that was executing, when known
    context_lost: bool = True  # the CUDA context became unusable (else the engine process died)


@dataclass(frozen=True)
class KnownIssueMatch:
    """A known issue the configuration matches (engine/known_issues.py), as a result carries it."""

    key: str
    summary: str
    outcome: str  # what happens when it runs: "crash" or "refused"
    established: str  # how the issue was established


@dataclass(frozen=True)
class RunResult:
    config: SdpaConfig
    status: str
    message: str = ""
    errors: tuple[dict[str, str], ...] = ()  # field errors when status is invalid
    device: str = ""  # "cuda" or "cpu"
    cache_hit: bool = False
    passes: tuple[PassResult, ...] = ()
    environment: Environment | None = None
    wall_seconds: float = 0.0
    crash: Crash | None = None  # when status is crash: what was running
    known_issues: tuple[KnownIssueMatch, ...] = ()  # known issues it matches (run anyway, or not run)
    schema_version: str = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.status in GOOD_STATUSES

    def pass_of(self, kind: str) -> PassResult | None:
        return next((p for p in self.passes if p.kind == kind), None)

    @property
    def forward(self) -> PassResult | None:
        """The pass the headline leads with: every run has a forward once it got that far."""
        return self.pass_of(FORWARD)

    @property
    def step_us(self) -> float | None:
        """Kernel time of every pass's heuristic plan added up (one training step of attention);
        None for a single pass or when a pass was not timed."""
        if len(self.passes) < 2 or any(p.timing is None for p in self.passes):
            return None
        return sum(p.timing.median_us for p in self.passes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["config"] = self.config.to_dict()
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Any) -> RunResult:
        """A saved result's dict (any schema this version reads) -> the record; ResultError names
        the field of the wrong shape, ConfigError the configuration's problems."""
        if not isinstance(data, dict):
            raise ResultError(f"a saved result is a JSON object, not {kind_of(data)}")
        version = data.get("schema_version", "0")
        if not isinstance(version, str):
            raise ResultError(f"schema_version must be text, not {kind_of(version)}")
        major = version.split(".")[0]
        if major == "1":
            if not isinstance(data.get("config", {}), dict):
                raise ResultError(f"config must be an object, not {kind_of(data['config'])}")
            try:
                data = upgrade_v1(data)
            except (AttributeError, TypeError, KeyError, IndexError) as exc:  # a hand-edited 1.x file
                raise ResultError(f"a schema {version} result of the wrong shape: {exc}") from exc
        elif major != SCHEMA_VERSION.split(".")[0]:
            raise ValueError(
                f"result schema {version} is not readable by this version (reads {SCHEMA_VERSION})"
            )
        return read_record(cls, {**data, "schema_version": SCHEMA_VERSION}, "")  # new fields at defaults

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        """A saved result's JSON text -> the record; for any text, only ValueError (ResultError
        and ConfigError among them)."""
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise ResultError("arrays or objects nested too deeply to read") from exc
        return cls.from_dict(data)


def autotune_verdict(
    plans: tuple[PlanResult, ...], heuristic_plan: int | None, fastest_plan: int | None
) -> str:
    """Whether timing every plan found one faster than the heuristic's pick, and by how much;
    '' when fewer than two plans were timed."""
    timed = [p for p in plans if p.timing is not None]
    by_index = {p.index: p for p in plans}
    pick, fastest = by_index.get(heuristic_plan), by_index.get(fastest_plan)
    if len(timed) < 2 or pick is None or fastest is None or pick.timing is None:
        return ""
    if fastest.index == pick.index:
        return f"the heuristic's pick is the fastest of {len(timed)} timed plans"
    ratio = pick.timing.median_us / fastest.timing.median_us
    gain = f"{(ratio - 1) * 100:.1f}% faster" if ratio < 1.05 else f"{ratio:.2f}x faster"
    noise = " (within run-to-run spread)" if fastest.timing.p90_us >= pick.timing.p10_us else ""
    return f"plan {fastest.index} ({fastest.name}) is {gain} than the heuristic's pick{noise}"


def pass_from_dict(d: dict[str, Any]) -> PassResult:
    return read_record(PassResult, d, "pass")


def timing_from_dict(d: dict[str, Any] | None) -> TimingStats | None:
    return read_record(TimingStats, d, "timing") if d else None
