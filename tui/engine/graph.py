"""Build a cuDNN SDPA graph step by step, timing each phase, and list its plans.

The phases are the frontend's own calls, in the seed's order. What each one does in
frontend 1.32 is recorded in PHASE_NOTES because the names mislead: `validate()` is a
Python check that works without a GPU, `build_operation_graph()` does nothing for SDPA,
lowering and heuristics happen in `create_execution_plans()`, and `build_plans()`
JIT-compiles the chosen engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .config import SdpaConfig
from .layouts import strides
from .results import PhaseTiming, PlanResult

PHASES = (
    "define",
    "validate",
    "build_operation_graph",
    "create_execution_plans",
    "check_support",
    "build_plans",
)

PHASE_NOTES = {
    "define": "pygraph, tensors with layout strides, sdpa node, output dims/strides (Python only)",
    "validate": "Python checks of shapes and options; runs without a GPU; first call of a process ~0.25 s",
    "build_operation_graph": "no work for SDPA in frontend 1.32",
    "create_execution_plans": "lowering to cuDNN and the heuristic query; once per graph",
    "check_support": "asks cuDNN whether the selected plan can run",
    "build_plans": "finalises the heuristic's first buildable plan (JIT compile on a cold process)",
}

# The names of graph.sdpa keywords this product sets. The frontend accepts any
# keyword silently, so a misspelling would change nothing and say nothing: every
# keyword goes through sdpa_kwargs(), and a test checks these against the binding.
SDPA_KEYWORDS = frozenset(
    {"name", "q", "k", "v", "is_inference", "generate_stats", "attn_scale", "use_causal_mask",
     "use_causal_mask_bottom_right", "diagonal_alignment", "diagonal_band_left_bound", "use_padding_mask",
     "seq_len_q", "seq_len_kv", "use_alibi_mask", "bias", "implementation", "dropout", "rng_dump"}
)


class GraphBuildError(Exception):
    """A phase failed. `unsupported` is True when cuDNN said the graph is not supported
    (a user-facing answer, not a bug); `phases` holds the timings up to the failure."""

    def __init__(self, phase: str, message: str, unsupported: bool, phases: list[PhaseTiming], graph_json: str):
        super().__init__(message)
        self.phase = phase
        self.message = message
        self.unsupported = unsupported
        self.phases = phases
        self.graph_json = graph_json


def cudnn_data_type(cudnn: Any, dtype: str) -> Any:
    return {"fp16": cudnn.data_type.HALF, "bf16": cudnn.data_type.BFLOAT16}[dtype]


def heuristic_modes(cudnn: Any, names: tuple[str, ...]) -> list[Any]:
    return [getattr(cudnn.heur_mode, n) for n in names]


def sdpa_kwargs(config: SdpaConfig, tensors: dict[str, Any] | None = None) -> dict[str, Any]:
    """The keywords of graph.sdpa for this config; `tensors` are the graph's q, k, v and the
    optional seq_len_q, seq_len_kv and bias tensors (absent: the option keywords only)."""
    import cudnn

    kw: dict[str, Any] = {"name": "sdpa", "is_inference": True, "attn_scale": config.scale}
    tensors = dict(tensors or {})
    seed, offset = tensors.pop("seed", None), tensors.pop("offset", None)
    kw.update(tensors)
    if config.dropout and seed is not None:
        kw["dropout"] = (config.dropout, seed, offset)
    if config.causal == "top_left":
        kw["use_causal_mask"] = True
    elif config.causal == "bottom_right":
        kw["use_causal_mask_bottom_right"] = True
    if config.window:
        kw["diagonal_band_left_bound"] = config.window
        if config.causal == "none":
            kw["diagonal_alignment"] = cudnn.diagonal_alignment.TOP_LEFT
    if config.padded:
        kw["use_padding_mask"] = True
    if config.alibi:
        kw["use_alibi_mask"] = True
    if config.implementation != "auto":
        kw["implementation"] = getattr(cudnn.attention_implementation, config.implementation.upper())
    unknown = set(kw) - SDPA_KEYWORDS
    assert not unknown, f"sdpa keywords not declared in SDPA_KEYWORDS: {unknown}"
    return kw


@dataclass
class SdpaGraph:
    """A defined (and possibly built) graph with the tensor handles needed to run it."""

    config: SdpaConfig
    graph: Any
    q: Any
    k: Any
    v: Any
    o: Any
    extras: dict[str, Any] = field(default_factory=dict)  # seq_len_q, seq_len_kv, bias graph tensors
    phases: list[PhaseTiming] = field(default_factory=list)
    plans: list[PlanResult] = field(default_factory=list)
    heuristic_index: int | None = None
    workspace_bytes: int = 0

    def json(self) -> str:
        try:
            return str(self.graph)
        except Exception as exc:  # describing must never break a run
            return f'{{"error": "graph could not be described: {exc}"}}'

    def variant_pack(self, data: dict[str, Any]) -> dict[Any, Any]:
        """Graph tensors -> device tensors, from the device tensors by name (q, k, v, o, extras)."""
        pack = {self.q: data["q"], self.k: data["k"], self.v: data["v"], self.o: data["o"]}
        pack.update({t: data[name] for name, t in self.extras.items()})
        return pack


def _timed(phases: list[PhaseTiming], name: str, fn: Callable[[], Any], graph_json: Callable[[], str]) -> Any:
    import cudnn

    t0 = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:
        dt = time.perf_counter() - t0
        unsupported = isinstance(exc, cudnn.cudnnGraphNotSupportedError)
        message = str(exc).strip() or type(exc).__name__
        phases.append(PhaseTiming(name, dt, PHASE_NOTES[name], ok=False, error=message))
        raise GraphBuildError(name, message, unsupported, phases, graph_json()) from exc
    phases.append(PhaseTiming(name, time.perf_counter() - t0, PHASE_NOTES[name]))
    return result


def define(config: SdpaConfig, handle: Any = None, rng_dump: bool = False) -> SdpaGraph:
    """Describe the problem to cuDNN, tensors named like the math (q, k, v, o). With
    `rng_dump`, the graph also writes the dropout mask it drew (to check the output)."""
    import cudnn

    io = cudnn_data_type(cudnn, config.dtype)
    graph = cudnn.pygraph(
        io_data_type=io,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    layout = config.layout
    q = graph.tensor(name="q", dim=config.q_dims, stride=strides(config.q_dims, layout), data_type=io)
    k = graph.tensor(name="k", dim=config.k_dims, stride=strides(config.k_dims, layout), data_type=io)
    v = graph.tensor(name="v", dim=config.v_dims, stride=strides(config.v_dims, layout), data_type=io)
    extras: dict[str, Any] = {}
    if config.padded:
        for name in ("seq_len_q", "seq_len_kv"):
            extras[name] = graph.tensor(
                name=name, dim=(config.b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT32
            )
    if config.dropout:
        for name in ("seed", "offset"):
            extras[name] = graph.tensor(name=name, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT64)
        if rng_dump:
            dims = (config.b, config.h_q, config.s_q, config.s_kv)
            extras["rng_dump"] = graph.tensor(
                name="rng_dump", dim=dims, stride=strides(dims, "BHSD"), data_type=cudnn.data_type.FLOAT
            )
    if config.bias != "none":
        dims = bias_dims(config)
        extras["bias"] = graph.tensor(name="bias", dim=dims, stride=strides(dims, "BHSD"), data_type=io)
    o, _stats = graph.sdpa(**sdpa_kwargs(config, {"q": q, "k": k, "v": v, **extras}))
    o.set_output(True).set_dim(config.o_dims).set_stride(strides(config.o_dims, layout)).set_data_type(io)
    return SdpaGraph(config, graph, q, k, v, o, extras)


def bias_dims(config: SdpaConfig) -> tuple[int, int, int, int]:
    return (config.b if config.bias[0] == "b" else 1, config.h_q if config.bias[-1] == "h" else 1,
            config.s_q, config.s_kv)


def define_and_validate(config: SdpaConfig, handle: Any = None, rng_dump: bool = False) -> SdpaGraph:
    """The phases that need no GPU: enough to hear cuDNN's own verdict on shapes and options."""
    phases: list[PhaseTiming] = []
    holder: dict[str, SdpaGraph] = {}

    def json_so_far() -> str:
        return holder["g"].json() if "g" in holder else ""

    holder["g"] = _timed(phases, "define", lambda: define(config, handle, rng_dump), json_so_far)
    g = holder["g"]
    _timed(phases, "validate", g.graph.validate, json_so_far)
    g.phases = phases
    return g


def build(config: SdpaConfig, handle: Any, rng_dump: bool = False, every_plan: bool = True) -> SdpaGraph:
    """All six phases, then every candidate plan described and built (needs a GPU). Without
    `every_plan` only the heuristic's pick is built (a graph used only to check)."""
    import cudnn

    g = define_and_validate(config, handle, rng_dump)
    phases = g.phases
    graph = g.graph
    _timed(phases, "build_operation_graph", graph.build_operation_graph, g.json)
    _timed(
        phases,
        "create_execution_plans",
        lambda: graph.create_execution_plans(heuristic_modes(cudnn, config.heuristics)),
        g.json,
    )
    _timed(phases, "check_support", graph.check_support, g.json)
    _timed(phases, "build_plans", graph.build_plans, g.json)
    if not every_plan:  # execute() runs the plan build_plans() selected
        g.workspace_bytes = graph.get_workspace_size()
        return g
    g.plans = _enumerate_plans(graph, phases[-1].seconds)
    built = [p for p in g.plans if p.built]
    if not built:
        raise GraphBuildError("build_plans", "no plan could be built", True, phases, g.json())
    g.heuristic_index = built[0].index
    g.plans = [
        _replace(p, is_heuristic_pick=(p.index == g.heuristic_index)) for p in g.plans
    ]
    g.workspace_bytes = max((p.workspace_bytes or 0) for p in built)
    graph.build_plan_at_index(g.heuristic_index)  # already built: re-selects it for execute()
    return g


def _enumerate_plans(graph: Any, heuristic_build_seconds: float) -> list[PlanResult]:
    """Describe and build each candidate. build_plans() walked the list from index 0 and
    kept the first plan that builds, so the first success here is the heuristic's pick,
    already compiled; its build time is the build_plans phase."""
    plans: list[PlanResult] = []
    first_built_seen = False
    for i in range(graph.get_execution_plan_count()):
        name = _ask(lambda i=i: graph.get_plan_name_at_index(i), f"plan {i}")
        engine_knobs = _ask(lambda i=i: graph.get_engine_and_knobs_at_index(i), None)
        engine_id, knobs = (engine_knobs if isinstance(engine_knobs, tuple) else (None, {}))
        notes = _ask(lambda i=i: graph.get_behavior_notes_for_plan_at_index(i), [])
        t0 = time.perf_counter()
        try:
            graph.build_plan_at_index(i)
            built, error = True, ""
        except Exception as exc:
            built, error = False, str(exc).strip() or type(exc).__name__
        seconds = time.perf_counter() - t0
        # a plan knows its workspace once built
        workspace = _ask(lambda i=i: graph.get_workspace_size_plan_at_index(i), None)
        if built and not first_built_seen:
            seconds, first_built_seen = heuristic_build_seconds, True
        plans.append(
            PlanResult(
                index=i,
                name=str(name),
                engine_id=int(engine_id) if engine_id is not None else None,
                knobs={_enum_name(k): int(v) for k, v in (knobs or {}).items()},
                workspace_bytes=int(workspace) if workspace is not None else None,
                behavior_notes=tuple(_enum_name(n) for n in (notes or [])),
                built=built,
                build_error=error,
                build_seconds=seconds if built else None,
            )
        )
    return plans


def _ask(fn: Callable[[], Any], default: Any) -> Any:
    """A plan query that fails describes the plan less; it must not fail the run."""
    try:
        return fn()
    except Exception:
        return default


def _enum_name(value: Any) -> str:
    text = getattr(value, "name", None) or str(value)
    return text.split(".")[-1]


def _replace(plan: PlanResult, **changes: Any) -> PlanResult:
    import dataclasses

    return dataclasses.replace(plan, **changes)
