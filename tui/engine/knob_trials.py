"""A knob search on the GPU: the candidates knob_search.py chooses, each built with
`create_execution_plan(engine_id, knobs)`, checked against the fp32 reference and timed.

The forward is built and measured first as a run measures it (the heuristic's plans timed and
checked, the peers timed), so the search starts from what a run would report. Candidates are
appended to a graph of their own, defined the same way, and run on the forward's tensors. Each
engine's knobs come from cuDNN's knob query; an engine the heuristic did not offer is searched
when its default setting builds. At the end the best few found are timed again beside the
heuristic's pick with the run's full replays, so the gain reported is one measurement's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from ..model.knob_search import (
    BUILD_FAILED,
    BUILT,
    CHECK_FAILED,
    CRASHED,
    HEURISTIC,
    PINNED,
    SEARCHED,
    STOP_CANCELLED,
    TIMING_FAILED,
    Budget,
    EngineSpace,
    KnobAxis,
    Trial,
    ranked_us,
    search,
)
from ..model.options import RunOptions, TimingOptions
from ..model.pins import Pin
from ..model.results import PlanResult
from ..model.search_results import SearchOptions, SearchResult, forward_of
from ..model.statuses import STATUS_CANCELLED, STATUS_CPU_ONLY, STATUS_CRASH, STATUS_ERROR, STATUS_INVALID
from ..model.validation import validate
from . import faults
from .cancel import Cancelled
from .graph import SdpaGraph, _enum_name, define, heuristic_modes
from .measure import Measurement
from .passes import FORWARD_PASS, BuiltPass
from .timing import kernel_time

# candidates are timed in the burst regime over fewer replays than a run's; the best are confirmed
SEARCH_TIMING = TimingOptions(replays=8, rest_max_s=0.5, burst_ms=20.0)
MAX_WORKSPACE = 4 << 30  # a candidate that asks for more is not run
# the confirmation's other places of the inputs: copies made after pads of these sizes; on the H200
# the decode preset's KERNEL_CFG=27 read 151.6-160.0 µs over such places, its pick 163.5-164.5 µs
PLACEMENT_PADS_MIB = (64, 130, 268)
INFERRED_SPAN = 16  # a knob known only from a plan's value is searched over 0..max(2·value, this)


def run_search(
    engine: Any, config: Any, options: SearchOptions, progress: Callable[[str], None]
) -> SearchResult:
    """Search the forward's knob space of `config` on the engine's GPU. Never raises for a bad or
    unsupported configuration, a cancel or a lost context: the result says what happened."""
    env = engine.environment()
    base = dict(config=config, environment=env, budget_s=options.budget_s, crashes=options.crashes)
    errors = validate(config, env.gpu_memory_bytes if env.gpu_available else None)
    if errors:
        return SearchResult(status=STATUS_INVALID, message="; ".join(e.message for e in errors), **base)
    if not env.gpu_available:
        words = f"a knob search builds and times plans on a GPU: {env.unavailable_reason}"
        return SearchResult(status=STATUS_CPU_ONLY, message=words, **base)
    started = time.monotonic()
    run_options = RunOptions(timing=SEARCH_TIMING, seed=options.seed, peers=options.peers)
    trials: list[Trial] = []
    known: dict[str, Any] = {}  # what a stop or a crash still reports: the pick, the spaces, the peers
    trials_run: Trials | None = None
    forward_config = forward_of(config)
    try:
        result = engine.run(forward_config, run_options, progress=progress)
        forward = result.forward if result.passes else None
        if forward is None or forward.status not in ("ok", "mismatch") or forward.heuristic_plan is None:
            words = result.message or "the forward did not run"
            return SearchResult(status=result.status, message=words, **base)
        pick = forward.plan(forward.heuristic_plan)
        known.update(
            pick_plan=_known(pick).plan if pick is not None else "", peers=tuple(forward.field_peers)
        )
        trials += [
            *(_known(p) for p in forward.plans),
            *options.resume,
        ]  # resumed: what a crashed process found
        trials_run = Trials(engine, forward_config, progress)
        spaces, skipped = trials_run.spaces(forward.plans)
        known.update(spaces=tuple(spaces), skipped=tuple(skipped))
        budget = Budget(max(options.budget_s - options.spent_s, 0.0))
        _found, stopped = search(
            spaces, trials_run.track(trials), budget, tuple(trials), progress, options.seed
        )
        confirmed = trials_run.confirm(trials, forward, options.confirm)
    except Cancelled:
        return SearchResult(status=STATUS_CANCELLED, message="stopped: asked to", stopped=STOP_CANCELLED,
                            trials=tuple(trials), elapsed_s=time.monotonic() - started, **known, **base)  # fmt: skip
    except Exception as exc:
        status, words = STATUS_ERROR, f"{type(exc).__name__}: {exc}"
        if faults.sticky(exc):
            lost = engine.context_lost(FORWARD_PASS, config, exc)
            status, words = STATUS_CRASH, lost.message
            if trials_run is not None and trials_run.current is not None:  # the candidate that crashed
                trials.append(Trial(trials_run.current.text(), CRASHED, error=faults.first_line(exc)))
        return SearchResult(status=status, message=words, stopped=words, trials=tuple(trials),
                            elapsed_s=time.monotonic() - started, **known, **base)  # fmt: skip
    return SearchResult(status="ok", stopped=stopped, trials=tuple(trials), confirmed=confirmed,
                        elapsed_s=time.monotonic() - started, **known, **base)  # fmt: skip


def _known(p: PlanResult) -> Trial:
    """A plan of the heuristic's list (or the pinned one) as the search's starting point."""
    origin = PINNED if p.is_pinned else HEURISTIC
    text = Pin.of(p.engine_id if p.engine_id is not None else -1, p.knobs).text()
    if not p.built:
        return Trial(text, BUILD_FAILED, origin, p.name, error=p.build_error)
    t = p.timing
    status = BUILT if p.matches is not False else CHECK_FAILED
    if t is None:
        return Trial(text, TIMING_FAILED, origin, p.name, error=p.build_error or "not timed")
    return Trial(text, status, origin, p.name, t.median_us, t.p10_us, t.p90_us, p.max_abs_error,
                 replay_us=t.replay_us, kernels=t.kernels_per_call)  # fmt: skip


class Trials:
    """The forward's candidates on one graph of their own: built, checked and timed one by one."""

    def __init__(self, engine: Any, config: Any, progress: Callable[[str], None]) -> None:
        import cudnn

        self.cudnn, self.engine, self.config, self.progress = cudnn, engine, config, progress
        built = engine.built_passes(config)
        self.forward: BuiltPass = built[FORWARD_PASS.kind]
        self.before = built
        self.bench = engine.bench()
        g = define(config, engine.cudnn_handle())
        g.graph.validate()
        g.graph.build_operation_graph()
        g.graph.create_execution_plans(heuristic_modes(cudnn, config.heuristics))  # lowers the graph
        self.graph = SdpaGraph(config, g.graph, g.tensors, g.kind)  # no pick: every plan by its index
        self.workspace = self.forward.workspace
        self.built_at: dict[str, int] = {}  # candidate -> its index in the candidates' graph
        self.current: Pin | None = None  # the candidate being tried: the one a crash names
        self._pads: list[Any] = []  # what places the confirmation's copies of the inputs elsewhere

    # ---- the spaces ------------------------------------------------------------------------
    def spaces(self, plans: tuple[PlanResult, ...]) -> tuple[list[EngineSpace], list[str]]:
        """Every engine cuDNN's knob query describes for this graph, those the plans use first (an
        engine the query cannot describe, but a plan uses, gets the knob types its plans carry);
        and the engines left out, with the query's words."""
        used = list(dict.fromkeys(p.engine_id for p in plans if p.engine_id is not None and p.engine_id >= 0))
        count = _ask(lambda: int(self.graph.graph.get_engine_count()), 0)
        out, skipped = [], []
        for engine_id in [*used, *(e for e in range(count) if e not in used)]:
            axes = self.knob_axes(engine_id)
            if isinstance(axes, tuple):
                out.append(EngineSpace(engine_id, axes))
            elif engine_id in used:
                out.append(
                    EngineSpace(engine_id, _inferred(engine_id, plans), "the knob types its plans carry")
                )
            else:
                skipped.append(f"engine {engine_id}: {axes}")
        return out, skipped

    def knob_axes(self, engine_id: int) -> tuple[KnobAxis, ...] | str:
        """The engine's knobs as cuDNN's knob query gives them, or the query's refusal in words."""
        try:
            found = self.graph.graph.get_knobs_for_engine(engine_id)
        except Exception as exc:
            return _cudnn_words(exc)
        axes = []
        for k in found or ():
            name = _enum_name(getattr(k, "type", ""))
            lo, hi, stride = int(k.min_value), int(k.max_value), int(k.stride)
            if name and name != "NOT_SET" and hi >= lo:
                axes.append(KnobAxis(name, lo, hi, max(stride, 1)))
        return tuple(axes)

    # ---- one candidate -----------------------------------------------------------------------
    def track(self, trials: list[Trial]) -> Callable[[Pin], Trial]:
        """try_plan for the search: each trial also kept in `trials`, so a stop keeps what was found."""

        def tried(pin: Pin) -> Trial:
            trial = self.trial(pin)
            trials.append(trial)
            return trial

        return tried

    def trial(self, pin: Pin) -> Trial:
        self.current = pin
        trial = self._trial(pin)
        self.current = None
        return trial

    def _trial(self, pin: Pin) -> Trial:
        t0 = time.perf_counter()
        graph = self.graph.graph
        try:
            graph.create_execution_plan(pin.engine_id, pin.knob_types(self.cudnn))
            index = graph.get_execution_plan_count() - 1
            self.select(index)  # built and selected: execute() runs it, as a pinned run does
            need = int(graph.get_workspace_size_plan_at_index(index))
        except Exception as exc:
            if faults.sticky(exc):
                raise
            return Trial(
                pin.text(), BUILD_FAILED, error=faults.first_line(exc), seconds=time.perf_counter() - t0
            )
        name = str(_ask(lambda: graph.get_plan_name_at_index(index), ""))
        self.graph.plans.append(
            PlanResult(index=index, name=f"{name} ({pin.text()})", built=True)
        )  # a fault names it
        if need > MAX_WORKSPACE:
            words = f"needs {need} bytes of workspace, over the search's {MAX_WORKSPACE} limit"
            return Trial(pin.text(), BUILD_FAILED, name=name, error=words, seconds=time.perf_counter() - t0)
        m = self.measurement(need)
        try:
            checks = m.check(m.outputs_of(index))
            stats = kernel_time(
                m.run_plan(index), self.bench.set_stream, SEARCH_TIMING, self.bench.l2_bytes, self.bench.gpu
            )
        except Exception as exc:
            if faults.sticky(exc):
                raise
            words = f"{type(exc).__name__}: {faults.first_line(exc)}"
            return Trial(pin.text(), TIMING_FAILED, name=name, error=words, seconds=time.perf_counter() - t0)
        self.built_at[pin.text()] = index
        worst = max((c.cudnn.max_abs for c in checks if c.cudnn is not None), default=None)
        status = BUILT if all(c.passed for c in checks) else CHECK_FAILED
        return Trial(pin.text(), status, SEARCHED, name, stats.median_us, stats.p10_us, stats.p90_us, worst,
                     seconds=time.perf_counter() - t0, replay_us=stats.replay_us,
                     kernels=stats.kernels_per_call)  # fmt: skip

    def select(self, index: int) -> None:
        """Build (or re-select) the candidate at `index`: the plan the candidates' graph's execute()
        runs, as a run executes its pick or its pin (execute_plan_at_index is the other plans' way)."""
        self.graph.graph.build_plan_at_index(index)
        self.graph.heuristic_index = index

    def measurement(self, workspace_bytes: int) -> Measurement:
        """The forward's tensors, reference and tolerances, run through the candidates' graph."""
        import torch

        if workspace_bytes > self.workspace.numel():
            self.workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device="cuda")
        built = dataclasses.replace(self.forward, graph=self.graph, workspace=self.workspace)
        return Measurement(FORWARD_PASS, built, self.before, self.bench)

    # ---- the confirmation ----------------------------------------------------------------------
    def confirm(self, trials: list[Trial], forward: Any, how_many: int) -> tuple[Trial, ...]:
        """The heuristic's pick and the `how_many` fastest others that passed, timed again with a
        run's full replays, side by side at each of a few places of the inputs in memory (a plan's
        time can depend on where K and V lie): the figures the gain is reported from."""
        chosen, by_plan = self._to_confirm(trials, forward, how_many)
        places = self.placements()
        stats: dict[str, list[Any]] = {t.plan: [] for t in chosen}
        for place, data in enumerate(places, 1):
            for t in chosen:
                self.progress(f"searching: confirming {t.plan} (inputs at place {place} of {len(places)})")
                stats[t.plan].append(kernel_time(self._confirm_run(t.plan, by_plan, data), self.bench.set_stream,
                                                 TimingOptions(), self.bench.l2_bytes, self.bench.gpu))  # fmt: skip
        out = [_confirmed(t, stats[t.plan], len(places) > 1) for t in chosen]
        self._pads = []  # the copies go with `places`
        return tuple(out)

    def _to_confirm(
        self, trials: list[Trial], forward: Any, how_many: int
    ) -> tuple[list[Trial], dict[str, PlanResult]]:
        """The trials to confirm, the heuristic's pick first, each a plan that can run again (a
        candidate built here or a plan of the heuristic's list); and those plans by their text."""
        pick = forward.plan(forward.heuristic_plan)
        by_plan = {
            Pin.of(p.engine_id if p.engine_id is not None else -1, p.knobs).text(): p for p in forward.plans
        }
        pick_text = next((text for text, p in by_plan.items() if p is pick), None)
        ranked = sorted((t for t in trials if t.passed and t.plan != pick_text), key=lambda t: t.time_us or 0)
        chosen = [t for t in trials if t.plan == pick_text and t.passed][:1] + ranked[:how_many]
        return [t for t in chosen if t.plan in self.built_at or t.plan in by_plan], by_plan

    def _confirm_run(self, plan_text: str, by_plan: dict[str, PlanResult], data: dict[str, Any]) -> Any:
        """One execution of a confirmed plan on `data`: a candidate selected in the candidates' graph,
        a plan of the heuristic's list from the forward's own."""
        index = self.built_at.get(plan_text)
        if index is not None:
            self.select(index)
            built = dataclasses.replace(self.forward, graph=self.graph, workspace=self.workspace, data=data)
        else:
            index = by_plan[plan_text].index
            built = dataclasses.replace(self.forward, data=data)
        return Measurement(FORWARD_PASS, built, self.before, self.bench).run_plan(index)

    def placements(self) -> list[dict[str, Any]]:
        """The forward's tensors where the run put them, then copies of them placed after pads of
        PLACEMENT_PADS_MIB (each kept while the others are timed, so each lands elsewhere), as far as
        free memory allows twice what each needs."""
        import torch

        data = self.forward.data
        tensors = {name: t for name, t in data.items() if isinstance(t, torch.Tensor) and t.is_cuda}
        size = sum(t.untyped_storage().nbytes() for t in tensors.values())
        places, self._pads = [data], []
        for mib in PLACEMENT_PADS_MIB:
            if torch.cuda.mem_get_info()[0] < 2 * (size + (mib << 20)):
                break
            self._pads.append(torch.empty(mib << 20, dtype=torch.uint8, device="cuda"))
            copies = {name: _copy(torch, t) for name, t in tensors.items()}
            places.append({**data, **copies})
        return places


def _confirmed(t: Trial, stats: list[Any], several: bool) -> Trial:
    """The trial with its confirmed figures: in full at the run's own inputs, and with `several`
    places, its time (as ranked) at each."""
    first = stats[0]  # at the run's own inputs: its full figure
    at_each = tuple(ranked_us(s.median_us, s.replay_us, s.kernels_per_call) for s in stats) if several else ()
    return dataclasses.replace(t, median_us=first.median_us, p10_us=first.p10_us, p90_us=first.p90_us,
                               replay_us=first.replay_us, kernels=first.kernels_per_call,
                               placements_us=at_each)  # fmt: skip


def _copy(torch: Any, t: Any) -> Any:
    """`t` in memory of its own, with its strides (a view's gaps kept, as the graph declared them)."""
    copy = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    return copy.copy_(t)


def _inferred(engine_id: int, plans: tuple[PlanResult, ...]) -> tuple[KnobAxis, ...]:
    """Axes for an engine the knob query cannot describe: each knob type its plans carry, from 0
    to twice the largest value seen (at least INFERRED_SPAN)."""
    seen: dict[str, int] = {}
    for p in plans:
        if p.engine_id == engine_id:
            for name, value in p.knobs.items():
                seen[name] = max(seen.get(name, 0), int(value))
    return tuple(KnobAxis(name, 0, max(2 * v, INFERRED_SPAN)) for name, v in sorted(seen.items()))


def _cudnn_words(exc: Exception) -> str:
    """cuDNN's status in a refusal ('CUDNN_STATUS_NOT_SUPPORTED'), else its first line."""
    text = faults.first_line(exc)
    return next((w.strip(",.") for w in text.split() if w.startswith("CUDNN_STATUS_")), text)


def _ask(fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception:
        return default
