"""Configuration in, RunResult out: the one path the CLI and the dashboard share.

`Engine` owns what is expensive to make: the CUDA context, the cuDNN handle and an LRU
cache of built graphs with their tensors, so running a configuration again costs no
rebuild. Without a usable GPU it still does what can be done on the CPU: cuDNN's own
validation, the graph's JSON, FLOPs and bytes, and a torch CPU reference run.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import environment as envmod
from .config import SdpaConfig
from .graph import (
    FP8_BACKWARD_AMAX,
    FP8_FORWARD_AMAX,
    FP8_FORWARD_SCALES,
    GraphBuildError,
    SdpaGraph,
    build,
    define_and_validate,
)
from .layouts import allocate
from .reference import (
    FP8_MAX,
    REFERENCE_NAME,
    TOLERANCES,
    compare,
    dequantise,
    make_inputs,
    quantise,
    random_like,
    reference_fp32,
    reference_grads,
    tolerance,
    torch_dtype,
    torch_sdpa,
    torch_sdpa_grads,
    valid_rows,
)
from .results import (
    STATUS_CPU_ONLY,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_MISMATCH,
    STATUS_OK,
    STATUS_UNSUPPORTED,
    Accuracy,
    BackwardResult,
    Environment,
    ErrorMetrics,
    Fp8Scaling,
    PlanResult,
    RunResult,
    TimingStats,
)
from .timing import TimingOptions, host_overhead_us, kernel_time

CPU_REFERENCE_MAX_FLOPS = 4e9  # a few seconds of fp32 math on a small CPU
GRADIENTS = ("dQ", "dK", "dV")
GRAD_REFERENCE_NAME = "fp32 autograd of the reference on the same logical tensors and the same dO"
FP8_RECIPE = (
    "per-tensor: q, k, v, dO scaled by 448/amax before rounding to E4M3; scale_s = 448·(1-dropout), the bound of "
    "the softmax weights; outputs (O, dQ, dK, dV, dP) by delayed scaling: one warm-up execution with scale 1, "
    "then 448/amax of its result"
)


@dataclass(frozen=True)
class RunOptions:
    timing: TimingOptions = field(default_factory=TimingOptions)
    autotune: bool = True  # time every plan that builds, not only the heuristic's pick
    check: bool = True  # compare with the fp32 reference
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        d = dict(data)
        d["timing"] = TimingOptions(**d.get("timing", {}))
        return cls(**d)


@dataclass
class _Entry:
    """A built graph and everything needed to run it again."""

    graph: SdpaGraph
    data: dict[str, Any]  # device tensors by name: q, k, v, o and the extras the graph reads
    workspace: Any
    reference: Any = None
    torch_metrics: ErrorMetrics | None = None
    rows: Any = None  # the real query rows (padding), the only ones compared
    check_graph: SdpaGraph | None = None  # with dropout: the same graph, also dumping its mask
    dropout_mask: Any = None  # kept for the backward's reference (training with dropout)
    tolerance: tuple[float, float] = (0.0, 0.0)  # (atol, rtol) against the reference, set with it
    backward: _BackwardEntry | None = None

    @property
    def o(self) -> Any:
        return self.data["o"]

    @property
    def pack(self) -> dict[Any, Any]:
        return self.graph.variant_pack(self.data)

    def inputs(self) -> tuple[Any, Any, Any, Any]:
        """q, k, v and bias as the values the graph computes with (FP8: dequantised)."""
        return (*(values(self.graph.config, self.data, n) for n in ("q", "k", "v")), self.data.get("bias"))


@dataclass
class _BackwardEntry:
    """The backward graph of a training step; its data shares q, k, v, o and stats with the forward's."""

    graph: SdpaGraph
    data: dict[str, Any]
    workspace: Any
    reference: tuple[Any, Any, Any] | None = None
    torch_metrics: dict[str, ErrorMetrics] | None = None
    tolerances: dict[str, tuple[float, float]] = field(
        default_factory=dict
    )  # per gradient, set with the reference
    rows: tuple[Any, Any] = (None, None)  # real query rows, real key/value rows
    scaled: bool = False  # FP8: the output scales were set from a warm-up execution's amax

    @property
    def pack(self) -> dict[Any, Any]:
        return self.graph.variant_pack(self.data)


class Engine:
    def __init__(self, cache_size: int = 6, environment: Environment | None = None):
        """`environment` overrides what the machine reports (e.g. one that says no GPU, to
        get the CPU-mode answer on a GPU box)."""
        # the frontend logs each decline as a warning; the same words reach the user in
        # the RunResult, so the log would only print them twice
        logging.getLogger("cudnn").setLevel(logging.ERROR)
        self.cache_size = cache_size
        self._env: Environment | None = environment
        self._handle: Any = None
        self._cache: OrderedDict[SdpaConfig, _Entry] = OrderedDict()
        self._progress: Callable[[str], None] = lambda _text: None

    # ---- environment ---------------------------------------------------------------
    def environment(self) -> Environment:
        if self._env is None:
            self._env = envmod.collect()
        return self._env

    def _cudnn_handle(self) -> Any:
        if self._handle is None:
            import cudnn
            import torch

            torch.cuda.init()
            self._handle = cudnn.create_handle()
            cudnn.set_stream(self._handle, torch.cuda.current_stream().cuda_stream)
        return self._handle

    def _set_stream(self, ptr: int) -> None:
        import cudnn

        cudnn.set_stream(self._cudnn_handle(), ptr)

    # ---- run -------------------------------------------------------------------------
    def run(
        self,
        config: SdpaConfig,
        options: RunOptions | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> RunResult:
        """Never raises for a bad or unsupported configuration: the result says what happened.
        `progress` hears what the engine is doing now (building, checking, timing ...)."""
        options = options or RunOptions()
        self._progress = progress or (lambda _text: None)
        t0 = time.perf_counter()
        env = self.environment()
        base = dict(config=config, flops=config.flops(), io_bytes=config.io_bytes(), environment=env)
        errors = config.validate(env.gpu_memory_bytes if env.gpu_available else None)
        if errors:
            return RunResult(
                status=STATUS_INVALID,
                message="; ".join(e.message for e in errors),
                errors=tuple({"field": e.field, "message": e.message} for e in errors),
                **base,
            )
        try:
            if not env.gpu_available:
                result = self._run_cpu(config, options, env, base)
            else:
                result = self._run_gpu(config, options, base)
        except GraphBuildError as exc:
            result = RunResult(
                status=STATUS_UNSUPPORTED if exc.unsupported else STATUS_ERROR,
                message=f"{exc.phase}: {exc.message}",
                phases=tuple(exc.phases),
                graph_json=exc.graph_json,
                device="cuda" if env.gpu_available else "cpu",
                **base,
            )
        except Exception as exc:  # a failure is a result to show, not a crash
            result = RunResult(
                status=STATUS_ERROR, message=f"{type(exc).__name__}: {exc}", device="cuda", **base
            )
        return dataclasses.replace(result, wall_seconds=time.perf_counter() - t0)

    # ---- CPU mode -------------------------------------------------------------------------
    def _run_cpu(self, config: SdpaConfig, options: RunOptions, env: Environment, base: dict) -> RunResult:
        self._progress("validating")
        g = define_and_validate(config)
        accuracy = None
        if options.check:
            self._progress("checking on the CPU")
            accuracy = cpu_reference_check(config, options.seed, env.unavailable_reason)
        backward = None
        status, message = STATUS_CPU_ONLY, f"GPU figures unavailable: {env.unavailable_reason}"
        if config.backward:
            backward = self._validate_backward_cpu(config, options, env)
            if backward.status not in (STATUS_OK, STATUS_CPU_ONLY):
                status, message = backward.status, f"backward: {backward.message}"
        return RunResult(
            backward=backward,
            status=status,
            message=message,
            device="cpu",
            phases=tuple(g.phases),
            graph_json=g.json(),
            accuracy=accuracy,
            **base,
        )

    def _validate_backward_cpu(
        self, config: SdpaConfig, options: RunOptions, env: Environment
    ) -> BackwardResult:
        """Without a GPU: cuDNN's own validation of the backward graph, and torch's low-precision
        backward checked against fp32 autograd on the CPU for small problems."""
        try:
            g = define_and_validate(config, backward=True)
        except GraphBuildError as exc:
            return backward_refused(config, exc)
        note = f"CPU only ({env.unavailable_reason}): cuDNN's backward did not run"
        metrics: dict[str, ErrorMetrics] = {}
        atols: dict[str, float] = {}
        rtol = 0.0
        if options.check and config.flops() * 3.5 <= CPU_REFERENCE_MAX_FLOPS and not config.padded:
            q, k, v, bias = cpu_inputs(config, options.seed)
            d_o = random_like(config, config.o_dims, "cpu", options.seed + 1).to(q.dtype)
            plain = config.replace(dropout=0.0)
            refs = reference_grads(plain, q, k, v, d_o, bias)
            grads = torch_sdpa_grads(plain, q, k, v, d_o, bias)
            for name, got, ref in zip(GRADIENTS, grads, refs, strict=True):
                atol, rtol = tolerance(config, ref, grad=True)
                metrics[name], atols[name] = compare(got, ref, atol, rtol), atol
            note += (
                f"; torch's {str(q.dtype).removeprefix('torch.')} backward on the CPU is checked instead"
                + (" (dropout left off)" if config.dropout else "")
            )
        return BackwardResult(
            status=STATUS_CPU_ONLY,
            phases=tuple(g.phases),
            graph_json=g.json(),
            note=note,
            reference=GRAD_REFERENCE_NAME if metrics else "",
            torch_gradients=metrics,
            atol=atols,
            rtol=rtol,
            torch_backend="torch SDPA backward (CPU)",
            **backward_counts(config),
        )

    # ---- GPU mode ---------------------------------------------------------------------------
    def _entry(self, config: SdpaConfig, seed: int) -> tuple[_Entry, bool]:
        import torch

        entry = self._cache.get(config)
        if entry is not None:
            self._cache.move_to_end(config)
            return entry, True
        handle = self._cudnn_handle()
        self._progress("building")
        g = build(config, handle)
        data = device_tensors(config, "cuda", seed)
        workspace = torch.empty(max(g.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        entry = _Entry(g, data, workspace, rows=valid_rows(config, "cuda"))
        if config.fp8 and config.o_dtype == "fp8_e4m3":
            self._progress("scaling")
            run = lambda: g.graph.execute(entry.pack, workspace, handle=handle)  # noqa: E731
            delayed_scaling(run, data, {"amax_o": ("scale_o", None)})
        self._cache[config] = entry
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
            torch.cuda.empty_cache()
        return entry, False

    def _dropout_mask(self, entry: _Entry, handle: Any) -> Any:
        """Run the check graph (the same graph, also dumping the dropout mask it draws) once and
        return the mask. The timed graph does not dump: writing the mask would slow it."""
        import torch

        config = entry.graph.config
        if entry.check_graph is None:
            entry.check_graph = build(config, handle, rng_dump=True, every_plan=False)
        dims = (config.b, config.h_q, config.s_q, config.s_kv)
        dump = torch.empty(dims, dtype=torch.float32, device="cuda")
        out = torch.empty_like(entry.o)
        data = {**entry.data, "o": out, "rng_dump": dump}
        if "stats" in data:
            data["stats"] = torch.empty_like(data["stats"])
        ws = torch.empty(max(entry.check_graph.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        entry.check_graph.graph.execute(entry.check_graph.variant_pack(data), ws, handle=handle)
        torch.cuda.synchronize()
        return dump

    def clear_cache(self) -> None:
        self._cache.clear()

    def executor(self, config: SdpaConfig, backward: bool = False) -> Callable[[], None]:
        """One execute() of the heuristic's plan (of the backward, with `backward`) for a config
        already run: what a user's code would call, for the profiler and benchmarks to measure."""
        entry = self._cache[config]
        target = entry.backward if backward else entry
        if target is None:
            raise KeyError(f"no backward graph was run for {config.label()}")
        handle = self._cudnn_handle()
        pack, ws, graph = target.pack, target.workspace, target.graph.graph
        return lambda: graph.execute(pack, ws, handle=handle)

    def output(self, config: SdpaConfig, name: str = "o") -> Any:
        """A tensor (logical b, h, s, d) the last execution of a config already run wrote:
        o, or with a backward dQ, dK, dV; FP8 values dequantised."""
        entry = self._cache[config]
        data = entry.data if name == "o" else entry.backward.data
        return values(config, data, name)

    def _run_gpu(self, config: SdpaConfig, options: RunOptions, base: dict) -> RunResult:
        entry, hit = self._entry(config, options.seed)
        g = entry.graph
        handle = self._cudnn_handle()
        pack, ws = entry.pack, entry.workspace

        def run_plan(index: int) -> Callable[[], None]:
            if index == g.heuristic_index:  # what a user's execute() runs
                return lambda: g.graph.execute(pack, ws, handle=handle)
            return lambda: g.graph.execute_plan_at_index(pack, ws, index=index, handle=handle)

        def output_of(index: int) -> Any:
            poison(entry.o)  # an output the plan never wrote cannot pass
            run_plan(index)()
            synchronize()
            return values(config, entry.data, "o")

        accuracy = None
        if options.check:
            self._progress("checking")
            accuracy = self._check_forward(entry, handle, output_of)

        def check_plan(index: int) -> tuple[float, bool]:
            if index == g.heuristic_index and accuracy is not None and accuracy.cudnn is not None:
                m = accuracy.cudnn
            else:
                m = compare(output_of(index), entry.reference, accuracy.atol, accuracy.rtol, entry.rows)
            return m.max_abs, m.mismatched == 0 and m.nonfinite == 0

        plans, fastest = self._time_plans(
            g, run_plan, options, config.flops(), check_plan if accuracy else None
        )
        timing = plans_timing(plans, g.heuristic_index)
        host = host_overhead_us(run_plan(g.heuristic_index)) if timing is not None else None
        status, message = STATUS_OK, ""
        if accuracy is not None and not accuracy.passed:
            status = STATUS_MISMATCH
            m = accuracy.cudnn
            message = (
                f"output differs from the fp32 reference: max abs error {m.max_abs:.3g} "
                f"({m.mismatched} of {m.total} elements outside atol {accuracy.atol:.3g} + rtol {accuracy.rtol:g}·|ref|)"
            )
        backward = None
        if config.backward:
            run_plan(g.heuristic_index)()  # the forward's o and stats, as the heuristic's plan writes them
            backward = self._run_backward(entry, options, base)
            if status == STATUS_OK and backward.status != STATUS_OK:
                status, message = backward.status, f"backward: {backward.message}"
        return RunResult(
            status=status,
            message=message,
            device="cuda",
            cache_hit=hit,
            phases=tuple(g.phases),
            plans=tuple(plans),
            heuristic_plan=g.heuristic_index,
            fastest_plan=fastest,
            timing=timing,
            host_overhead_us=host,
            tflops=_tflops(config.flops(), timing.median_us) if timing else None,
            bandwidth_gbs=config.io_bytes() / (timing.median_us * 1e-6) / 1e9 if timing else None,
            accuracy=accuracy,
            graph_json=g.json(),
            fp8=fp8_scaling(entry.data, FP8_FORWARD_SCALES, FP8_FORWARD_AMAX, {"amax_o": entry.reference})
            if config.fp8
            else None,
            backward=backward,
            **base,
        )

    def _check_forward(self, entry: _Entry, handle: Any, output_of: Callable[[int], Any]) -> Accuracy:
        config = entry.graph.config
        note = ""
        if entry.reference is None:
            dropout_mask = self._dropout_mask(entry, handle) if config.dropout else None
            entry.reference = reference_fp32(
                config,
                *entry.inputs(),
                dropout_mask=dropout_mask,
                progress=lambda share: self._progress(f"checking: reference {share:.0%}"),
            )
            entry.dropout_mask = dropout_mask if config.backward else None
            del dropout_mask
            entry.tolerance = tolerance(config, entry.reference)
            if not config.dropout:
                entry.torch_metrics = compare(
                    torch_sdpa(config, *torch_inputs(entry)), entry.reference, *entry.tolerance, entry.rows
                )
        atol, rtol = entry.tolerance
        if config.dropout:
            note = (
                "dropout on: the reference applies the mask cuDNN drew (dumped by the same graph with "
                "the same seed); torch's SDPA cannot apply that mask, so its error is not shown"
            )
        backend = "torch.nn.functional.scaled_dot_product_attention"
        if config.fp8:
            backend += " in fp16 on the dequantised inputs (torch has no FP8 attention)"
            note = (
                f"FP8: the reference computes on the dequantised E4M3 inputs; atol is {TOLERANCES[config.dtype][0]:g} "
                "of max |reference| (per-tensor scaling)" + (f"; {note}" if note else "")
            )
        return Accuracy(
            reference=REFERENCE_NAME,
            device="cuda",
            atol=atol,
            rtol=rtol,
            cudnn=compare(output_of(entry.graph.heuristic_index), entry.reference, atol, rtol, entry.rows),
            torch_lowp=entry.torch_metrics,
            torch_backend=backend,
            note=note,
        )

    def _time_plans(
        self,
        g: SdpaGraph,
        run_plan: Callable[[int], Callable[[], None]],
        options: RunOptions,
        flops: int,
        check_plan: Callable[[int], tuple[float, bool]] | None,
    ) -> tuple[list[PlanResult], int | None]:
        """Kernel time (and, when checking, the error) of every plan that built, or of the
        heuristic's pick only without autotune; the index of the fastest."""
        plans: list[PlanResult] = []
        timings: dict[int, TimingStats] = {}
        what = "backward plan" if g.kind == "backward" else "plan"
        for plan in g.plans:
            if not plan.built or not (options.autotune or plan.index == g.heuristic_index):
                plans.append(plan)
                continue
            changes: dict[str, Any] = {}
            self._progress(f"timing {what} {plan.index + 1} of {len(g.plans)}")
            try:
                stats = kernel_time(
                    run_plan(plan.index), self._set_stream, options.timing, self.environment().l2_bytes
                )
                timings[plan.index] = stats
                changes.update(timing=stats, tflops=_tflops(flops, stats.median_us))
                if check_plan is not None:
                    max_abs, ok = check_plan(plan.index)
                    changes.update(max_abs_error=max_abs, matches=ok)
            except Exception as exc:
                changes.update(build_error=f"timing failed: {type(exc).__name__}: {exc}")
            plans.append(dataclasses.replace(plan, **changes))
        fastest = min(timings, key=lambda i: timings[i].median_us) if timings else None
        return [dataclasses.replace(p, is_fastest=(p.index == fastest)) for p in plans], fastest

    # ---- backward ------------------------------------------------------------------------
    def _backward_entry(self, entry: _Entry, seed: int) -> _BackwardEntry:
        import torch

        if entry.backward is not None:
            return entry.backward
        config = entry.graph.config
        self._progress("building the backward")
        g = build(config, self._cudnn_handle(), backward=True)
        data = backward_tensors(config, entry.data, "cuda", seed)
        ws = torch.empty(max(g.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        entry.backward = _BackwardEntry(
            g, data, ws, rows=(valid_rows(config, "cuda"), valid_rows(config, "cuda", 1))
        )
        return entry.backward

    def _run_backward(self, entry: _Entry, options: RunOptions, base: dict) -> BackwardResult:
        """The training step's backward; a backward cuDNN refuses is a result, not an exception."""
        config = entry.graph.config
        try:
            bentry = self._backward_entry(entry, options.seed)
        except GraphBuildError as exc:
            return backward_refused(config, exc)
        g = bentry.graph
        handle = self._cudnn_handle()
        pack, ws = bentry.pack, bentry.workspace

        def run_plan(index: int) -> Callable[[], None]:
            if index == g.heuristic_index:
                return lambda: g.graph.execute(pack, ws, handle=handle)
            return lambda: g.graph.execute_plan_at_index(pack, ws, index=index, handle=handle)

        if config.fp8 and not bentry.scaled:
            self._progress("scaling the backward")
            delayed_scaling(
                run_plan(g.heuristic_index),
                bentry.data,
                {
                    "amax_dq": ("scale_dQ", None),
                    "amax_dk": ("scale_dK", None),
                    "amax_dv": ("scale_dV", None),
                    "amax_dp": ("scale_dP", "descale_dP"),
                },
            )
            bentry.scaled = True

        def grads_of(index: int) -> list[Any]:
            for name in GRADIENTS:
                poison(bentry.data[name])
            run_plan(index)()
            synchronize()
            return [values(config, bentry.data, name) for name in GRADIENTS]

        gradients: dict[str, ErrorMetrics] = {}
        atol: dict[str, float] = {}
        rtol = 0.0
        note = ""
        if options.check:
            self._progress("checking the backward")
            if bentry.reference is None:
                q, k, v, bias = entry.inputs()
                d_o = values(config, bentry.data, "dO")
                bentry.reference = reference_grads(
                    config,
                    q,
                    k,
                    v,
                    d_o,
                    bias,
                    entry.dropout_mask,
                    progress=lambda share: self._progress(f"checking the backward: autograd {share:.0%}"),
                )
                bentry.tolerances = {
                    n: tolerance(config, ref, grad=True)
                    for n, ref in zip(GRADIENTS, bentry.reference, strict=True)
                }
                if not config.dropout:
                    tq, tk, tv, tbias = torch_inputs(entry)
                    t_do = d_o.to(tq.dtype)
                    grads = torch_sdpa_grads(config, tq, tk, tv, t_do, tbias)
                    if grads is not None:
                        bentry.torch_metrics = self._compare_grads(grads, bentry)[0]
            gradients, atol, rtol = self._compare_grads(grads_of(g.heuristic_index), bentry)
            if config.dropout:
                note = "dropout on: the reference applies the mask cuDNN drew in the forward; torch's error is not shown"
            elif config.padded:
                note = "padding: torch's backward gives NaN on fully masked rows, so its error is not shown"

        def check_plan(index: int) -> tuple[float, bool]:
            metrics = self._compare_grads(grads_of(index), bentry)[0]
            return max(m.max_abs for m in metrics.values()), all(
                m.mismatched == 0 and m.nonfinite == 0 for m in metrics.values()
            )

        repeatable = None
        if options.check:
            first = [t.clone() for t in grads_of(g.heuristic_index)]
            second = grads_of(g.heuristic_index)
            repeatable = all(bool((a == b).all().item()) for a, b in zip(first, second, strict=True))
            del first, second
        plans, fastest = self._time_plans(
            g, run_plan, options, config.backward_flops(), check_plan if options.check else None
        )
        timing = plans_timing(plans, g.heuristic_index)
        status, message = STATUS_OK, ""
        result = BackwardResult(
            phases=tuple(g.phases),
            plans=tuple(plans),
            heuristic_plan=g.heuristic_index,
            fastest_plan=fastest,
            timing=timing,
            host_overhead_us=host_overhead_us(run_plan(g.heuristic_index)) if timing else None,
            tflops=_tflops(config.backward_flops(), timing.median_us) if timing else None,
            bandwidth_gbs=config.backward_io_bytes() / (timing.median_us * 1e-6) / 1e9 if timing else None,
            reference=GRAD_REFERENCE_NAME if options.check else "",
            rtol=rtol,
            atol=atol,
            gradients=gradients,
            torch_gradients=bentry.torch_metrics or {},
            torch_backend="torch SDPA backward"
            + (" in fp16 on the dequantised inputs" if config.fp8 else ""),
            bitwise_repeatable=repeatable,
            fp8=fp8_scaling(
                bentry.data,
                ("descale_o", "descale_dO", "scale_dQ", "scale_dK", "scale_dV", "scale_dP", "descale_dP"),
                FP8_BACKWARD_AMAX,
                dict(zip(("amax_dq", "amax_dk", "amax_dv"), bentry.reference or (), strict=False)),
            )
            if config.fp8
            else None,
            note=note,
            graph_json=g.json(),
            **backward_counts(config),
        )
        if result.passed is False:
            worst = max(GRADIENTS, key=lambda n: gradients[n].mismatched)
            m = gradients[worst]
            status = STATUS_MISMATCH
            message = (
                f"{worst} differs from fp32 autograd: max abs error {m.max_abs:.3g} ({m.mismatched} of {m.total} "
                f"elements outside atol {atol[worst]:.3g} + rtol {rtol:g}·|ref|)"
            )
        elif config.deterministic and repeatable is False:
            status = STATUS_MISMATCH
            message = "the deterministic backward gave different gradients on two executions"
        return dataclasses.replace(result, status=status, message=message)

    @staticmethod
    def _compare_grads(
        grads: Any, bentry: _BackwardEntry
    ) -> tuple[dict[str, ErrorMetrics], dict[str, float], float]:
        metrics, atols, rtol = {}, {}, 0.0
        for name, got, ref in zip(GRADIENTS, grads, bentry.reference, strict=True):
            atol, rtol = bentry.tolerances[name]
            rows = bentry.rows[0] if name == "dQ" else bentry.rows[1]
            metrics[name] = compare(got, ref, atol, rtol, rows)
            atols[name] = atol
        return metrics, atols, rtol


def values(config: SdpaConfig, data: dict[str, Any], name: str) -> Any:
    """A device tensor as the numbers it stands for: FP8 tensors times their descale (dQ, dK,
    dV and O divided by the scale they were written with)."""
    t = data[name]
    if not config.fp8 or t.element_size() != 1:
        return t
    if name in ("q", "k", "v", "dO"):
        return dequantise(t, data[f"descale_{name}"])
    scale = {"o": "scale_o", "dQ": "scale_dQ", "dK": "scale_dK", "dV": "scale_dV"}[name]
    return dequantise(t, 1.0 / data[scale])


def torch_inputs(entry: _Entry) -> tuple[Any, Any, Any, Any]:
    """What torch's own SDPA runs on: the same tensors, or for FP8 their dequantised values in fp16."""
    q, k, v, bias = entry.inputs()
    if entry.graph.config.fp8:
        return q.half(), k.half(), v.half(), bias
    return q, k, v, bias


def poison(t: Any) -> None:
    """Fill with NaN, so an element a plan never wrote cannot pass the check."""
    import torch

    if t.element_size() == 1:  # E4M3's NaN is 0x7f
        t.view(torch.uint8).fill_(0x7F)
    else:
        t.fill_(float("nan"))


def synchronize() -> None:
    import torch

    torch.cuda.synchronize()


def plans_timing(plans: list[PlanResult], index: int | None) -> TimingStats | None:
    return next((p.timing for p in plans if p.index == index), None)


def delayed_scaling(
    run: Callable[[], None], data: dict[str, Any], outputs: dict[str, tuple[str, str | None]]
) -> None:
    """FP8 outputs' scales from their amax: run once with scale 1, then set each scale to
    448/amax (and its descale to the inverse), so the next executions use E4M3's whole range."""
    for scale, descale in outputs.values():
        data[scale].fill_(1.0)
        if descale:
            data[descale].fill_(1.0)
    run()
    synchronize()
    for amax_name, (scale, descale) in outputs.items():
        amax = float(data[amax_name].item())
        value = FP8_MAX / amax if amax > 0 and amax == amax else 1.0
        data[scale].fill_(value)
        if descale:
            data[descale].fill_(1.0 / value)


def fp8_scaling(
    data: dict[str, Any], scales: tuple[str, ...], amax: tuple[str, ...], references: dict[str, Any]
) -> Fp8Scaling:
    return Fp8Scaling(
        recipe=FP8_RECIPE,
        scales={n: float(data[n].item()) for n in scales if n in data},
        amax={n: float(data[n].item()) for n in amax if n in data},
        reference_amax={n: float(r.abs().max().item()) for n, r in references.items() if r is not None},
    )


def scalar(value: float, device: str) -> Any:
    """A scale or amax tensor of an FP8 graph: fp32 (1, 1, 1, 1)."""
    import torch

    return torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=device)


def backward_counts(config: SdpaConfig) -> dict[str, Any]:
    """What a BackwardResult says of the config whatever happened: the option, FLOPs and bytes."""
    return dict(
        deterministic=config.deterministic, flops=config.backward_flops(), io_bytes=config.backward_io_bytes()
    )


def backward_refused(config: SdpaConfig, exc: GraphBuildError) -> BackwardResult:
    """A backward graph that did not build: cuDNN's words, the phases up to the failure."""
    return BackwardResult(
        status=STATUS_UNSUPPORTED if exc.unsupported else STATUS_ERROR,
        message=f"{exc.phase}: {exc.message}",
        phases=tuple(exc.phases),
        graph_json=exc.graph_json,
        **backward_counts(config),
    )


def device_tensors(config: SdpaConfig, device: str, seed: int) -> dict[str, Any]:
    """Everything the forward graph reads and writes, by name: q, k, v, o, and the stats,
    lengths, bias, dropout seed and FP8 scales when the config has them."""
    import torch

    q, k, v, bias = make_inputs(config, device, seed)
    data = {"q": q, "k": k, "v": v}
    if config.fp8:
        one = functools.partial(scalar, device=device)
        for name in ("q", "k", "v"):
            data[name], descale = quantise(data[name])
            data[f"descale_{name}"] = one(descale)
        scale_s = FP8_MAX * (1.0 - config.dropout)  # the softmax weights' bound, after dropout's 1/(1-p)
        data.update(scale_s=one(scale_s), descale_s=one(1.0 / scale_s), scale_o=one(1.0), amax_o=one(0.0))
    data["o"] = allocate(torch, config.o_dims, config.layout, torch_dtype(torch, config.o_dtype), device)
    if config.backward:
        data["stats"] = torch.empty((config.b, config.h_q, config.s_q, 1), dtype=torch.float32, device=device)
    if bias is not None:
        data["bias"] = bias
    if config.dropout:
        data["seed"] = torch.full((1, 1, 1, 1), config.dropout_seed, dtype=torch.int64, device=device)
        data["offset"] = torch.zeros((1, 1, 1, 1), dtype=torch.int64, device=device)
    if config.padded:
        for name, side in (("seq_len_q", 0), ("seq_len_kv", 1)):
            lens = [config.lengths(bi)[side] for bi in range(config.b)]
            data[name] = torch.tensor(lens, dtype=torch.int32, device=device).view(config.b, 1, 1, 1)
    return data


def backward_tensors(config: SdpaConfig, forward: dict[str, Any], device: str, seed: int) -> dict[str, Any]:
    """The backward's tensors: the forward's (q, k, v, o, stats, options) shared, a seeded output
    gradient dO, and dQ, dK, dV; for FP8 also the backward's scales and amax outputs."""
    import torch

    data = dict(forward)
    d_o = random_like(config, config.o_dims, device, seed + 1)
    dt = torch_dtype(torch, config.dtype)
    if config.fp8:
        one = functools.partial(scalar, device=device)
        descale = 1.0
        if config.o_dtype == "fp8_e4m3":  # dO comes in O's dtype
            d_o, descale = quantise(d_o)
        else:
            d_o = d_o.to(torch_dtype(torch, config.o_dtype))
        data.update(descale_dO=one(descale), descale_o=one(1.0 / float(forward["scale_o"].item())))
        data.update({n: one(1.0) for n in ("scale_dQ", "scale_dK", "scale_dV", "scale_dP", "descale_dP")})
        data.update({n: one(0.0) for n in FP8_BACKWARD_AMAX})
    data["dO"] = d_o
    for name, dims in (("dQ", config.q_dims), ("dK", config.k_dims), ("dV", config.v_dims)):
        data[name] = allocate(torch, dims, config.layout, dt, device)
    return data


def _tflops(flops: int, median_us: float) -> float | None:
    return flops / (median_us * 1e-6) / 1e12 if median_us > 0 else None


def cpu_inputs(config: SdpaConfig, seed: int) -> tuple[Any, Any, Any, Any]:
    """The CPU check's q, k, v, bias: as on the GPU; FP8 values quantised, then dequantised to fp16."""
    q, k, v, bias = make_inputs(config, "cpu", seed)
    if config.fp8:
        q, k, v = (dequantise(*quantise(x)).half() for x in (q, k, v))
    return q, k, v, bias


def cpu_reference_check(config: SdpaConfig, seed: int, reason: str) -> Accuracy:
    """Without a GPU: torch's own low-precision SDPA on the CPU against the fp32 reference,
    for problems small enough to finish in seconds."""
    atol, rtol = TOLERANCES[config.dtype]
    lowp = "fp16" if config.fp8 else config.dtype
    note = f"CPU only ({reason}): cuDNN did not run; torch's {lowp} SDPA on the CPU is checked instead"
    if config.flops() > CPU_REFERENCE_MAX_FLOPS:
        return Accuracy(
            reference=REFERENCE_NAME,
            device="cpu",
            atol=atol,
            rtol=rtol,
            cudnn=None,
            torch_lowp=None,
            note=f"CPU only ({reason}): problem too large for the CPU reference "
            f"({config.flops() / 1e9:.1f} GFLOP > {CPU_REFERENCE_MAX_FLOPS / 1e9:.0f})",
        )
    if config.dropout:
        note += "; dropout is left off in the CPU check (the mask is drawn on the GPU)"
        config = config.replace(dropout=0.0)
    if config.fp8:
        note += " (FP8: on the dequantised E4M3 inputs)"
    q, k, v, bias = cpu_inputs(config, seed)
    ref = reference_fp32(config, q, k, v, bias)
    atol, rtol = tolerance(config, ref)
    rows = valid_rows(config, "cpu")
    return Accuracy(
        reference=REFERENCE_NAME,
        device="cpu",
        atol=atol,
        rtol=rtol,
        cudnn=None,
        torch_lowp=compare(torch_sdpa(config, q, k, v, bias), ref, atol, rtol, rows),
        torch_backend="torch.nn.functional.scaled_dot_product_attention (CPU)",
        note=note,
    )
