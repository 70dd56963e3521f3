"""Immutable records of what the engine measured, and their JSON form.

Everything the CLI prints and the dashboard draws is one of these. They hold plain
numbers and strings only (no tensors, no cuDNN objects) so they can cross a process
boundary and be written to disk. `SCHEMA_VERSION` changes whenever a field's meaning
changes; readers refuse a newer major version rather than misread it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .config import SdpaConfig

SCHEMA_VERSION = "1.1"  # 1.1: backward and fp8 (absent in 1.0 files: read as None)

# What `status` of a RunResult can be.
STATUS_OK = "ok"  # built, ran, and (if checked) matched the reference
STATUS_MISMATCH = "mismatch"  # ran, but the output is outside tolerance
STATUS_INVALID = "invalid"  # the configuration does not make sense (see errors)
STATUS_UNSUPPORTED = "unsupported"  # cuDNN refused it, in its own words (see message)
STATUS_ERROR = "error"  # something failed that should not have (see message)
STATUS_CPU_ONLY = "cpu_only"  # no usable GPU: what could be done on the CPU was done


@dataclass(frozen=True)
class PhaseTiming:
    name: str
    seconds: float
    note: str = ""  # what this phase really does in the installed frontend
    ok: bool = True
    error: str = ""


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

    @property
    def spread_pct(self) -> float:
        return 100.0 * (self.p90_us - self.p10_us) / self.median_us if self.median_us else 0.0


@dataclass(frozen=True)
class PlanResult:
    index: int
    name: str
    engine_id: int | None = None
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
    max_abs_error: float | None = None  # this plan's output against the fp32 reference
    matches: bool | None = None  # within the dtype's tolerance


@dataclass(frozen=True)
class ErrorMetrics:
    max_abs: float
    max_rel: float
    mean_abs: float
    mismatched: int  # elements outside atol + rtol * |ref|
    total: int
    nonfinite: int = 0


@dataclass(frozen=True)
class Accuracy:
    """Error of an output against the fp32 reference computed on the same logical tensors."""

    reference: str  # how the reference was computed
    device: str  # "cuda" or "cpu"
    atol: float
    rtol: float
    cudnn: ErrorMetrics | None  # None in CPU mode (cuDNN did not run)
    torch_lowp: ErrorMetrics | None  # torch's own fp16/bf16 SDPA against the same reference
    torch_backend: str = ""  # which torch SDPA backend produced torch_lowp, when known
    note: str = ""

    @property
    def passed(self) -> bool | None:
        if self.cudnn is None:
            return None
        return self.cudnn.mismatched == 0 and self.cudnn.nonfinite == 0


@dataclass(frozen=True)
class Fp8Scaling:
    """The per-tensor scales an FP8 graph read and the amax values it wrote, beside the same
    maxima of the fp32 reference (an amax the kernel computed wrongly shows here)."""

    recipe: str  # how the scales were chosen
    scales: dict[str, float] = field(default_factory=dict)  # descale_q ... scale_o (scale_dQ ...)
    amax: dict[str, float] = field(default_factory=dict)  # amax_o (amax_dq, amax_dk, amax_dv, amax_dp)
    reference_amax: dict[str, float] = field(default_factory=dict)  # max |reference| of the same tensors


@dataclass(frozen=True)
class BackwardResult:
    """The training step's backward: its own graph, plans, kernel time, and dQ, dK, dV against
    fp32 autograd on the same logical tensors and the same output gradient."""

    status: str = STATUS_OK
    message: str = ""
    deterministic: bool = False
    phases: tuple[PhaseTiming, ...] = ()
    plans: tuple[PlanResult, ...] = ()
    heuristic_plan: int | None = None
    fastest_plan: int | None = None
    timing: TimingStats | None = None
    host_overhead_us: float | None = None
    tflops: float | None = None  # at 2.5x the forward's FLOPs
    flops: int = 0
    io_bytes: int = 0
    bandwidth_gbs: float | None = None
    reference: str = ""
    rtol: float = 0.0
    atol: dict[str, float] = field(default_factory=dict)  # per gradient: a share of its max |reference|
    gradients: dict[str, ErrorMetrics] = field(
        default_factory=dict
    )  # dQ, dK, dV: cuDNN against the reference
    torch_gradients: dict[str, ErrorMetrics] = field(default_factory=dict)  # torch's low-precision backward
    torch_backend: str = ""
    bitwise_repeatable: bool | None = None  # two executions gave identical dQ, dK, dV
    fp8: Fp8Scaling | None = None
    note: str = ""
    graph_json: str = ""

    @property
    def passed(self) -> bool | None:
        if not self.gradients:
            return None
        return all(m.mismatched == 0 and m.nonfinite == 0 for m in self.gradients.values())


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
    python_version: str = ""
    platform: str = ""


@dataclass(frozen=True)
class RunResult:
    config: SdpaConfig
    status: str
    message: str = ""
    errors: tuple[dict[str, str], ...] = ()  # field errors when status is invalid
    device: str = ""  # "cuda" or "cpu"
    cache_hit: bool = False
    phases: tuple[PhaseTiming, ...] = ()
    plans: tuple[PlanResult, ...] = ()
    heuristic_plan: int | None = None  # index of the plan cuDNN's heuristic would run
    fastest_plan: int | None = None  # index of the fastest plan measured
    timing: TimingStats | None = None  # kernel time of the heuristic's plan
    host_overhead_us: float | None = None  # host time of one execute() call
    tflops: float | None = None
    bandwidth_gbs: float | None = None
    flops: int = 0
    io_bytes: int = 0
    accuracy: Accuracy | None = None
    graph_json: str = ""
    environment: Environment | None = None
    wall_seconds: float = 0.0
    fp8: Fp8Scaling | None = None  # FP8 forward: scales and amax
    backward: BackwardResult | None = None  # with config.backward
    schema_version: str = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.status in (STATUS_OK, STATUS_CPU_ONLY)

    def plan(self, index: int | None) -> PlanResult | None:
        return next((p for p in self.plans if p.index == index), None)

    def autotune_verdict(self) -> str:
        """Whether timing every plan found one faster than the heuristic's pick, and by how much;
        '' when fewer than two plans were timed."""
        return autotune_verdict(self.plans, self.heuristic_plan, self.fastest_plan)

    @property
    def step_us(self) -> float | None:
        """Forward plus backward kernel time of the heuristic's plans: one training step of attention."""
        b = self.backward
        if self.timing is None or b is None or b.timing is None:
            return None
        return self.timing.median_us + b.timing.median_us

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["config"] = self.config.to_dict()
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        version = str(data.get("schema_version", "0"))
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise ValueError(
                f"result schema {version} is not readable by this version (reads {SCHEMA_VERSION})"
            )
        d = dict(data)
        d["config"] = SdpaConfig.from_dict(d["config"])
        d["phases"] = tuple(PhaseTiming(**p) for p in d.get("phases", ()))
        d["plans"] = tuple(_plan_from_dict(p) for p in d.get("plans", ()))
        d["timing"] = _timing(d.get("timing"))
        d["errors"] = tuple(d.get("errors", ()))
        if d.get("accuracy"):
            a = dict(d["accuracy"])
            a["cudnn"] = ErrorMetrics(**a["cudnn"]) if a.get("cudnn") else None
            a["torch_lowp"] = ErrorMetrics(**a["torch_lowp"]) if a.get("torch_lowp") else None
            d["accuracy"] = Accuracy(**a)
        if d.get("environment"):
            d["environment"] = Environment(**d["environment"])
        d["fp8"] = Fp8Scaling(**d["fp8"]) if d.get("fp8") else None
        if d.get("backward"):
            b = dict(d["backward"])
            b["phases"] = tuple(PhaseTiming(**p) for p in b.get("phases", ()))
            b["plans"] = tuple(_plan_from_dict(p) for p in b.get("plans", ()))
            b["timing"] = _timing(b.get("timing"))
            b["gradients"] = {k: ErrorMetrics(**m) for k, m in b.get("gradients", {}).items()}
            b["torch_gradients"] = {k: ErrorMetrics(**m) for k, m in b.get("torch_gradients", {}).items()}
            b["fp8"] = Fp8Scaling(**b["fp8"]) if b.get("fp8") else None
            d["backward"] = BackwardResult(**b)
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        return cls.from_dict(json.loads(text))


def autotune_verdict(
    plans: tuple[PlanResult, ...], heuristic_plan: int | None, fastest_plan: int | None
) -> str:
    """Whether timing every plan found one faster than the heuristic's pick, and by how much."""
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


def _timing(d: dict[str, Any] | None) -> TimingStats | None:
    return TimingStats(**d) if d else None


def _plan_from_dict(d: dict[str, Any]) -> PlanResult:
    d = dict(d)
    d["timing"] = _timing(d.get("timing"))
    d["behavior_notes"] = tuple(d.get("behavior_notes", ()))
    return PlanResult(**d)
