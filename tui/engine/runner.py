"""Configuration in, RunResult out: the one path the CLI and the dashboard share.

`Engine` owns what is expensive to make: the CUDA context, the cuDNN handle and an LRU
cache of built graphs with their tensors, so running a configuration again costs no
rebuild. Without a usable GPU it still does what can be done on the CPU: cuDNN's own
validation, the graph's JSON, FLOPs and bytes, and a torch CPU reference run.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import environment as envmod
from .config import SdpaConfig
from .graph import GraphBuildError, SdpaGraph, build, define_and_validate
from .layouts import allocate
from .reference import (
    REFERENCE_NAME,
    TOLERANCES,
    compare,
    make_inputs,
    reference_fp32,
    torch_sdpa,
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
    Environment,
    ErrorMetrics,
    PlanResult,
    RunResult,
    TimingStats,
)
from .timing import TimingOptions, host_overhead_us, kernel_time

CPU_REFERENCE_MAX_FLOPS = 4e9  # a few seconds of fp32 math on a small CPU


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

    @property
    def o(self) -> Any:
        return self.data["o"]

    @property
    def pack(self) -> dict[Any, Any]:
        return self.graph.variant_pack(self.data)

    def inputs(self) -> tuple[Any, Any, Any, Any]:
        return self.data["q"], self.data["k"], self.data["v"], self.data.get("bias")


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
        self, config: SdpaConfig, options: RunOptions | None = None, progress: Callable[[str], None] | None = None
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
        return RunResult(
            status=STATUS_CPU_ONLY,
            message=f"GPU figures unavailable: {env.unavailable_reason}",
            device="cpu",
            phases=tuple(g.phases),
            graph_json=g.json(),
            accuracy=accuracy,
            **base,
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
        ws = torch.empty(max(entry.check_graph.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        entry.check_graph.graph.execute(entry.check_graph.variant_pack(data), ws, handle=handle)
        torch.cuda.synchronize()
        return dump

    def clear_cache(self) -> None:
        self._cache.clear()

    def executor(self, config: SdpaConfig) -> Callable[[], None]:
        """One execute() of the heuristic's plan for a config already run: what a user's
        code would call, for the profiler and benchmarks to measure independently."""
        entry = self._cache[config]
        handle = self._cudnn_handle()
        pack, ws = entry.pack, entry.workspace
        return lambda: entry.graph.graph.execute(pack, ws, handle=handle)

    def output(self, config: SdpaConfig) -> Any:
        """The output tensor (logical b, h, s, d) of the last execution of a config already run."""
        return self._cache[config].o

    def _run_gpu(self, config: SdpaConfig, options: RunOptions, base: dict) -> RunResult:
        import torch

        entry, hit = self._entry(config, options.seed)
        g = entry.graph
        handle = self._cudnn_handle()
        pack, ws = entry.pack, entry.workspace
        atol, rtol = TOLERANCES[config.dtype]

        def run_plan(index: int) -> Callable[[], None]:
            if index == g.heuristic_index:  # what a user's execute() runs
                return lambda: g.graph.execute(pack, ws, handle=handle)
            return lambda: g.graph.execute_plan_at_index(pack, ws, index=index, handle=handle)

        def output_of(index: int) -> Any:
            entry.o.fill_(float("nan"))  # an output the plan never wrote cannot pass
            run_plan(index)()
            torch.cuda.synchronize()
            return entry.o

        accuracy = None
        if options.check:
            self._progress("checking")
            note = ""
            if entry.reference is None:
                dropout_mask = self._dropout_mask(entry, handle) if config.dropout else None
                entry.reference = reference_fp32(config, *entry.inputs(), dropout_mask=dropout_mask)
                del dropout_mask
                if not config.dropout:
                    entry.torch_metrics = compare(
                        torch_sdpa(config, *entry.inputs()), entry.reference, atol, rtol, entry.rows
                    )
            if config.dropout:
                note = ("dropout on: the reference applies the mask cuDNN drew (dumped by the same graph with "
                        "the same seed); torch's SDPA cannot apply that mask, so its error is not shown")
            accuracy = Accuracy(
                reference=REFERENCE_NAME,
                device="cuda",
                atol=atol,
                rtol=rtol,
                cudnn=compare(output_of(g.heuristic_index), entry.reference, atol, rtol, entry.rows),
                torch_lowp=entry.torch_metrics,
                torch_backend="torch.nn.functional.scaled_dot_product_attention",
                note=note,
            )

        plans: list[PlanResult] = []
        timings: dict[int, TimingStats] = {}
        for plan in g.plans:
            if not plan.built or not (options.autotune or plan.index == g.heuristic_index):
                plans.append(plan)
                continue
            changes: dict[str, Any] = {}
            self._progress(f"timing plan {plan.index + 1} of {len(g.plans)}")
            try:
                stats = kernel_time(run_plan(plan.index), self._set_stream, options.timing, base["environment"].l2_bytes)
                timings[plan.index] = stats
                changes.update(timing=stats, tflops=_tflops(config.flops(), stats.median_us))
                if options.check and entry.reference is not None:
                    if plan.index == g.heuristic_index and accuracy is not None and accuracy.cudnn is not None:
                        m = accuracy.cudnn
                    else:
                        m = compare(output_of(plan.index), entry.reference, atol, rtol, entry.rows)
                    changes.update(max_abs_error=m.max_abs, matches=m.mismatched == 0 and m.nonfinite == 0)
            except Exception as exc:
                changes.update(build_error=f"timing failed: {type(exc).__name__}: {exc}")
            plans.append(dataclasses.replace(plan, **changes))
        fastest = min(timings, key=lambda i: timings[i].median_us) if timings else None
        plans = [dataclasses.replace(p, is_fastest=(p.index == fastest)) for p in plans]
        timing = timings.get(g.heuristic_index)
        host = host_overhead_us(run_plan(g.heuristic_index)) if timing is not None else None
        status = STATUS_OK
        message = ""
        if accuracy is not None and not accuracy.passed:
            status = STATUS_MISMATCH
            m = accuracy.cudnn
            message = (
                f"output differs from the fp32 reference: max abs error {m.max_abs:.3g} "
                f"({m.mismatched} of {m.total} elements outside atol {atol:g} + rtol {rtol:g}·|ref|)"
            )
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
            **base,
        )


def device_tensors(config: SdpaConfig, device: str, seed: int) -> dict[str, Any]:
    """Everything the graph reads and writes, by name: q, k, v, o, and seq_len_q, seq_len_kv
    and bias when the config has them."""
    import torch

    q, k, v, bias = make_inputs(config, device, seed)
    data = {"q": q, "k": k, "v": v, "o": allocate(torch, config.o_dims, config.layout, q.dtype, device)}
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


def _tflops(flops: int, median_us: float) -> float | None:
    return flops / (median_us * 1e-6) / 1e12 if median_us > 0 else None


def cpu_reference_check(config: SdpaConfig, seed: int, reason: str) -> Accuracy:
    """Without a GPU: torch's own low-precision SDPA on the CPU against the fp32 reference,
    for problems small enough to finish in seconds."""
    atol, rtol = TOLERANCES[config.dtype]
    note = f"CPU only ({reason}): cuDNN did not run; torch's {config.dtype} SDPA on the CPU is checked instead"
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
    q, k, v, bias = make_inputs(config, "cpu", seed)
    ref = reference_fp32(config, q, k, v, bias)
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
