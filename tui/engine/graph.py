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

from ..model.config import SdpaConfig
from ..model.pins import Pin, parse
from ..model.results import PLAN_SOURCES, PassResult, PhaseTiming, PlanResult
from ..model.statuses import STATUS_ERROR, STATUS_UNSUPPORTED
from ..model.tensor_plan import TensorSpec, tensor_plan
from ..store import plan_cache
from .faults import first_line
from .keywords import UnsupportedOption, op_name, sdpa_kwargs

PHASES = (
    "define",
    "validate",
    "build_operation_graph",
    "create_execution_plans",
    "check_support",
    "build_plans",
    "load_plans",  # instead of the four before it, when the plans are in the plan cache
)

BUILD_PHASES, LOADED_PHASES = PHASES[:6], ("define", "validate", "load_plans")

NOT_MADE = "cuDNN would not make it"
UNCACHED = ("a score modifier is a score_mod callback, which the frontend's plan serializer cannot hold: "
            "its plans are built afresh in each engine process")  # fmt: skip  # a pinned plan's error when cuDNN would not append it
PHASE_NOTES = {
    "define": "pygraph, tensors with layout strides, sdpa node, output dims/strides (Python only)",
    "validate": "Python checks of shapes and options; runs without a GPU; first call of a process ~0.25 s",
    "build_operation_graph": "no work for SDPA in frontend 1.32",
    "create_execution_plans": "lowering to cuDNN and the heuristic query; once per graph",
    "check_support": "asks cuDNN whether the selected plan can run",
    "build_plans": "finalises the heuristic's first buildable plan (JIT compile on a cold process)",
    "load_plans": "every plan loaded from the plan cache, each into a graph of its own",
}


class GraphBuildError(Exception):
    """A phase failed. `unsupported` is True when cuDNN said the graph is not supported
    (a user-facing answer, not a bug); `phases` holds the timings up to the failure."""

    def __init__(
        self, phase: str, message: str, unsupported: bool, phases: list[PhaseTiming], graph_json: str
    ):
        super().__init__(message)
        self.phase = phase
        self.message = message
        self.unsupported = unsupported
        self.phases = phases
        self.graph_json = graph_json

    def result(self, **counts: Any) -> PassResult:
        """The pass this graph was for, not built: cuDNN's words and the phases up to the failure;
        `counts` says what the pass is (measure.counts)."""
        return PassResult(
            status=STATUS_UNSUPPORTED if self.unsupported else STATUS_ERROR,
            message=f"{self.phase}: {self.message}",
            phases=tuple(self.phases),
            graph_json=self.graph_json,
            **counts,
        )


def heuristic_modes(cudnn: Any, names: tuple[str, ...]) -> list[Any]:
    return [getattr(cudnn.heur_mode, n) for n in names]


@dataclass
class SdpaGraph:
    """A defined (and possibly built) graph with its tensors by name, the names the device
    tensors carry too (q, k, v, o, stats, dO, dQ ... and the options' extras)."""

    config: SdpaConfig
    graph: Any
    tensors: dict[str, Any]
    kind: str = "forward"  # or "backward"
    phases: list[PhaseTiming] = field(default_factory=list)
    plans: list[PlanResult] = field(default_factory=list)
    heuristic_index: int | None = None
    workspace_bytes: int = 0
    loaded: dict[int, Any] = field(default_factory=dict)  # plan index -> its graph, from the plan cache
    uids: dict[str, int] = field(default_factory=dict)  # what a loaded graph's tensors are, by name
    pinned_index: int | None = None  # the config's pinned plan (`plan`), when it built
    pin_error: str = ""  # why the pinned plan did not build
    described: str = ""  # the JSON once validated: as declared, whether its plans are built or loaded

    @property
    def chosen(self) -> int | None:
        """The plan this pass runs: the pinned one where it built, else the heuristic's pick."""
        return self.pinned_index if self.pinned_index is not None else self.heuristic_index

    def record_pinned(self, index: int | None) -> None:
        """Where the pinned plan is: run it when it built, else say why not."""
        plan = next((p for p in self.plans if p.index == index), None)
        if plan is not None and plan.built:
            self.pinned_index = index
        elif plan is not None:
            self.pin_error = plan.build_error or "it did not build"

    def json(self) -> str:
        try:
            return str(self.graph)
        except Exception as exc:  # describing must never break a run
            return f'{{"error": "graph could not be described: {exc}"}}'

    def variant_pack(self, data: dict[str, Any]) -> dict[Any, Any]:
        """Graph tensors -> device tensors, matched by name."""
        return {t: data[name] for name, t in self.tensors.items()}

    def runner(self, index: int | None, data: dict[str, Any], ws: Any, handle: Any) -> Callable[[], None]:
        """One execution of a plan: the heuristic's pick as a user's execute() runs it, another plan
        by its index, or a plan loaded from the plan cache through its own graph (tensors by uid)."""
        if index in self.loaded:
            graph, pack = self.loaded[index], {self.uids[name]: data[name] for name in self.tensors}
            return lambda: graph.execute(pack, ws, handle=handle)
        pack = self.variant_pack(data)
        if index == self.chosen:
            return lambda: self.graph.execute(pack, ws, handle=handle)
        return lambda: self.graph.execute_plan_at_index(pack, ws, index=index, handle=handle)


def _timed(phases: list[PhaseTiming], name: str, fn: Callable[[], Any], graph_json: Callable[[], str]) -> Any:
    import cudnn

    t0 = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:
        dt = time.perf_counter() - t0
        unsupported = isinstance(exc, cudnn.cudnnGraphNotSupportedError | UnsupportedOption)
        message = str(exc).strip() or type(exc).__name__
        phases.append(PhaseTiming(name, dt, PHASE_NOTES[name], ok=False, error=message))
        raise GraphBuildError(name, message, unsupported, phases, graph_json()) from exc
    phases.append(PhaseTiming(name, time.perf_counter() - t0, PHASE_NOTES[name]))
    return result


def cudnn_types(cudnn: Any) -> dict[str, Any]:
    """cuDNN's data types by the names the tensor plan gives them."""
    return {
        "fp16": cudnn.data_type.HALF,
        "bf16": cudnn.data_type.BFLOAT16,
        "fp8_e4m3": cudnn.data_type.FP8_E4M3,
        "fp32": cudnn.data_type.FLOAT,
        "int32": cudnn.data_type.INT32,
        "int64": cudnn.data_type.INT64,
    }


def define(
    config: SdpaConfig, handle: Any = None, rng_dump: bool = False, backward: bool = False
) -> SdpaGraph:
    """Describe the forward to cuDNN (q, k, v to o and stats) or, with `backward`, the backward
    (q, k, v, o, dO and the forward's stats to dQ, dK, dV), every tensor as the tensor plan has
    it. With `rng_dump`, the forward also writes the dropout mask it drew (to check the output)."""
    import cudnn

    plan, types = tensor_plan(config, backward, rng_dump), cudnn_types(cudnn)
    # the io type is the type of the 16-bit tensors; FP8 graphs declare every type explicitly
    graph = cudnn.pygraph(
        io_data_type=types["bf16" if config.o_dtype == "bf16" else "fp16"],
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    tensors: dict[str, Any] = {}

    def declare(spec: TensorSpec, t: Any = None) -> Any:
        """A read tensor (new) or a written one (`t`, returned by the operation), by its spec."""
        dtype = types[spec.dtype]
        if t is None:
            t = graph.tensor(name=spec.name, dim=spec.dims, stride=spec.strides, data_type=dtype)
        else:
            t.set_output(True).set_dim(spec.dims).set_stride(spec.strides).set_data_type(dtype)
        tensors[spec.name] = t
        if spec.offsets is not None:  # packed tokens: the sequences start at these offsets
            t.set_ragged_offset(declare(spec.offsets))
        return t

    reads = {spec.name: declare(spec) for spec in plan.reads}
    op = op_name(config, backward)
    returned = getattr(graph, op)(**sdpa_kwargs(config, reads, op, plan.tokens))
    by_name = {name: t for name, t in zip(plan.returns, returned, strict=True) if name}
    for spec in plan.writes:
        if spec.name in reads:  # a read tensor the operation fills in
            reads[spec.name].set_output(True)
        else:
            declare(spec, by_name[spec.name])
    return SdpaGraph(config, graph, tensors, "backward" if backward else "forward")


def define_and_validate(
    config: SdpaConfig, handle: Any = None, rng_dump: bool = False, backward: bool = False
) -> SdpaGraph:
    """The phases that need no GPU: enough to hear cuDNN's own verdict on shapes and options."""
    phases: list[PhaseTiming] = []
    holder: dict[str, SdpaGraph] = {}

    def json_so_far() -> str:
        return holder["g"].json() if "g" in holder else ""

    holder["g"] = _timed(phases, "define", lambda: define(config, handle, rng_dump, backward), json_so_far)
    g = holder["g"]
    _timed(phases, "validate", g.graph.validate, json_so_far)
    g.phases, g.described = phases, g.json()
    return g


def build(
    config: SdpaConfig,
    handle: Any,
    rng_dump: bool = False,
    every_plan: bool = True,
    backward: bool = False,
    cache: Any = None,
    machine: str = "",
    same_as: PlanResult | None = None,
) -> SdpaGraph:
    """All six phases, then every candidate plan described and built (needs a GPU), the config's
    pinned plan appended after the heuristic's. Without `every_plan` only the heuristic's pick is
    built (a graph used only to check), or a plan of the engine and knobs of `same_as` (the plan
    being checked) where cuDNN makes and builds it for this graph (`pinned_index`; else `pin_error`
    says why). With `backward`, the backward graph of the config's training step. With a plan
    cache (plan_cache.PlanCache) and the `machine` it is keyed by, the plans of a graph built
    before load from it instead; a graph built now is added to it."""
    import cudnn

    pinning = bool(config.plan) and not backward and every_plan  # a pin is the forward's
    cache = _usable(cache, config, every_plan)
    g = define_and_validate(config, handle, rng_dump, backward)
    key, started, built_in = None, time.perf_counter(), None
    if cache is not None:
        modes = (*config.heuristics, *((f"plan {config.plan}",) if pinning else ()))
        key = plan_cache.entry_key(g.json(), g.kind, modes, machine)
        t0 = time.perf_counter()
        built_in = plan_cache.restore(cache, key, g, handle)
    if built_in is None:
        wanted, pin_error = _wanted(config, cudnn, pinning, same_as if not every_plan else None)
        g.pin_error = pin_error or g.pin_error
        _build_plans(g, cudnn, wanted, every_plan)
    else:
        note = f"{PHASE_NOTES['load_plans']} (building them took {built_in:.2f} s)"
        g.phases.append(PhaseTiming("load_plans", time.perf_counter() - t0, note))
        g.record_pinned(next((p.index for p in g.plans if p.is_pinned), None))
    if key is not None and built_in is None and not g.pin_error.startswith(NOT_MADE):
        plan_cache.save(cache, key, g, time.perf_counter() - started)
    return g


def _usable(cache: Any, config: SdpaConfig, every_plan: bool) -> Any:
    """The plan cache where it may hold this graph's plans: not for a graph that builds only the
    heuristic's pick, nor for a score modifier (a callback no cache key can hold)."""
    if cache is None or not every_plan:
        return None
    if config.variant != "none":
        cache.notes.append(f"plan cache not used: {UNCACHED}")
        return None
    return cache


def _wanted(
    config: SdpaConfig, cudnn: Any, pinning: bool, same_as: PlanResult | None
) -> tuple[tuple[int, dict] | None, str]:
    """The plan to append as cuDNN makes one (the configuration's pin, or the engine and knobs of
    the plan being checked), and the pin's error ('' for none): an engine or knob cuDNN lacks."""
    try:
        pin = Pin.of(same_as.engine_id, same_as.knobs) if same_as is not None else None
        if pin is None and pinning:
            pin = parse(config.plan or "")
        return ((pin.engine_id, pin.knob_types(cudnn)) if pin else None), ""
    except Exception as exc:
        return None, f"{NOT_MADE}: {first_line(exc) or type(exc).__name__}"


def _build_plans(g: SdpaGraph, cudnn: Any, wanted: tuple[int, dict] | None, every_plan: bool) -> None:
    """The phases from the operation graph to the built plans, the plan `wanted` (an engine and its
    knobs) appended after the heuristic's list; with `every_plan`, every candidate built."""
    phases, graph = g.phases, g.graph
    _timed(phases, "build_operation_graph", graph.build_operation_graph, g.json)
    _timed(
        phases,
        "create_execution_plans",
        lambda: graph.create_execution_plans(heuristic_modes(cudnn, g.config.heuristics)),
        g.json,
    )
    pin_at = _append(g, *wanted) if wanted is not None else None
    _timed(phases, "check_support", graph.check_support, g.json)
    _timed(phases, "build_plans", graph.build_plans, g.json)
    if not every_plan:  # execute() runs the plan build_plans() selected, or the one built after it
        g.workspace_bytes = graph.get_workspace_size()
        if pin_at is not None:
            _select_same(g, pin_at)
        return
    _build_every_plan(g, pin_at)


def _append(g: SdpaGraph, engine_id: int, knobs: dict) -> int | None:
    """The plan of `engine_id` and `knobs` appended after the heuristic's list with
    create_execution_plan(): its index, or None (with `pin_error`) where cuDNN will not make it."""
    try:
        g.graph.create_execution_plan(engine_id, knobs)
    except Exception as exc:
        g.pin_error = f"{NOT_MADE}: {first_line(exc) or type(exc).__name__}"
        return None
    return g.graph.get_execution_plan_count() - 1


def _select_same(g: SdpaGraph, index: int) -> None:
    """Build the appended plan, which selects it for execute(); where it does not build, the
    heuristic's pick stays selected and `pin_error` says why."""
    try:
        g.graph.build_plan_at_index(index)
    except Exception as exc:
        g.pin_error = first_line(exc) or type(exc).__name__
        return
    g.pinned_index = index
    g.workspace_bytes = max(g.workspace_bytes, int(g.graph.get_workspace_size_plan_at_index(index) or 0))


def _build_every_plan(g: SdpaGraph, pin_at: int | None) -> None:
    """Every candidate described and built, so any plan can be timed; the heuristic's pick is the
    first that built (the pin aside), and the graph's workspace fits the largest plan."""
    graph, phases = g.graph, g.phases
    g.plans = _enumerate_plans(graph, phases[-1].seconds, pin_at)
    built = [p for p in g.plans if p.built]
    if not any(p.index != pin_at for p in built):
        raise GraphBuildError("build_plans", "no plan could be built", True, phases, g.json())
    g.heuristic_index = next(p.index for p in built if p.index != pin_at)
    g.plans = [
        _replace(p, is_heuristic_pick=(p.index == g.heuristic_index), is_pinned=(p.index == pin_at))
        for p in g.plans
    ]
    g.record_pinned(pin_at)
    g.workspace_bytes = max((p.workspace_bytes or 0) for p in built)
    graph.build_plan_at_index(g.chosen)  # already built: re-selects it for execute()


def _enumerate_plans(
    graph: Any, heuristic_build_seconds: float, pin_at: int | None = None
) -> list[PlanResult]:
    """Describe and build each candidate. build_plans() walked the list from index 0 and
    kept the first plan that builds, so the first success here is the heuristic's pick,
    already compiled; its build time is the build_plans phase. The pinned plan (at `pin_at`,
    after the heuristic's) is built here, its time its own."""
    plans: list[PlanResult] = []
    first_built_seen = False
    for i in range(graph.get_execution_plan_count()):
        name = _ask(lambda i=i: graph.get_plan_name_at_index(i), f"plan {i}")
        engine_knobs = _ask(lambda i=i: graph.get_engine_and_knobs_at_index(i), None)
        engine_id, knobs = engine_knobs if isinstance(engine_knobs, tuple) else (None, {})
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
        if built and not first_built_seen and i != pin_at:
            seconds, first_built_seen = heuristic_build_seconds, True
        plans.append(
            PlanResult(
                index=i,
                name=str(name),
                engine_id=int(engine_id) if engine_id is not None else None,
                source=_ask(lambda i=i: plan_source(graph, i), PLAN_SOURCES[0]),
                knobs={_enum_name(k): int(v) for k, v in (knobs or {}).items()},
                workspace_bytes=int(workspace) if workspace is not None else None,
                behavior_notes=tuple(_enum_name(n) for n in (notes or [])),
                built=built,
                build_error=error,
                build_seconds=seconds if built else None,
            )
        )
    return plans


def plan_source(graph: Any, index: int) -> str:
    """Where the plan at `index` comes from (PLAN_SOURCES): the frontend ranks the cuDNN library's
    engines and its own open-source ones in one list, told apart by engine id."""
    from cudnn.engines.engine_ids import BACKEND_HEURISTIC_ENGINE_ID, is_python_engine

    engine_id = graph.plans[index].engine_id
    if engine_id == BACKEND_HEURISTIC_ENGINE_ID:
        return PLAN_SOURCES[2]
    return PLAN_SOURCES[1] if is_python_engine(engine_id) else PLAN_SOURCES[0]


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
