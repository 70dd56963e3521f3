"""Configuration in, RunResult out: the one path the CLI and the dashboard share.

`Engine` owns what is expensive to make: the CUDA context, the cuDNN handle and an LRU
cache of built passes with their tensors, so running a configuration again costs no
rebuild. A run validates the configuration, measures each of its passes (measure.py; without
a usable GPU, what the CPU can do: cpu.py) and gives the verdict.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..model import known_issues
from ..model.config import SdpaConfig
from ..model.equivalents import equivalent_forms
from ..model.options import RunOptions
from ..model.results import Crash, Environment, KnownIssueMatch, PassResult, RunResult
from ..model.statuses import (
    BACKWARD,
    FORWARD,
    GOOD_STATUSES,
    STATUS_CANCELLED,
    STATUS_CPU_ONLY,
    STATUS_CRASH,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_KNOWN_ISSUE,
    STATUS_MISMATCH,
    STATUS_OK,
)
from ..model.validation import validate
from ..store.known_issues import recorded as recorded_issues
from ..store.plan_cache import PlanCache, fingerprint
from . import environment as envmod
from . import faults
from .cancel import Cancelled
from .cpu import cpu_pass, peers_not_run
from .forms import measure_forms
from .graph import GraphBuildError, build, define_and_validate
from .measure import Bench, Measurement, counts, measure, measure_declined
from .passes import FORWARD_PASS, BuiltPass, Pass, passes_of
from .tensors import workspace


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
        self._cache: OrderedDict[SdpaConfig, dict[str, BuiltPass]] = OrderedDict()
        self._progress: Callable[[str], None] = lambda _text: None
        self._doing = ""  # the engine's last words on what it does: what a crash interrupted
        self._gpu: Any = None  # telemetry.Nvml once opened; a str says why there is none
        self._lost: Crash | None = None  # set once the CUDA context is lost (`lost`)
        self.plans: PlanCache | None = None  # the plan cache on disk, opened at the first build
        self._handle_lock = threading.Lock()  # the warm-up thread may be making the handle
        self._warming: threading.Thread | None = None
        self.warm_up_error = ""  # why the warm-up stopped short ('' when it did not)

    # ---- environment ---------------------------------------------------------------
    def environment(self) -> Environment:
        if self._env is None:
            self._env = envmod.collect()
        return self._env

    def cudnn_handle(self) -> Any:
        with self._handle_lock:
            if self._handle is None:
                import cudnn
                import torch

                torch.cuda.init()
                handle = cudnn.create_handle()
                cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
                self._handle = handle
        return self._handle

    def warm_up(self) -> None:
        """Make, on a thread, what every process's first run makes: the cuDNN handle, and the
        reference's first use of cuBLAS and torch's kernels (0.3 s of the first case of a check
        on the H200, against 0.01 s for the next). An engine process starts this as it reports
        ready, so it overlaps the wait for the first request; a run waits for it before it builds."""
        self._warming = threading.Thread(target=self._warm, name="engine warm-up", daemon=True)
        self._warming.start()

    def _warm(self) -> None:
        try:
            import torch

            from .reference import make_inputs, reference_fp32
            from .tolerances import compare

            self.cudnn_handle()
            config = SdpaConfig(b=1, h_q=2, h_kv=1, s_q=64, s_kv=64, d_qk=64, d_v=64)
            q, k, v, _ = make_inputs(config, "cuda")
            ref = reference_fp32(config, q, k, v)
            compare(ref, ref, 1e-3, 1e-3)
            torch.cuda.synchronize()
        except Exception as exc:  # the first run meets the same fault and says what it is
            self.warm_up_error = f"{type(exc).__name__}: {exc}"

    def _warmed(self) -> None:
        """Wait for the warm-up: no other thread may launch work while a CUDA graph is captured
        (by the timing, or by a build: a warm-up beside one failed its cuBLAS call on the H200 once
        the CuTe DSL's engines were there) or the profiler records the plan's kernels."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None

    def _set_stream(self, ptr: int) -> None:
        import cudnn

        cudnn.set_stream(self.cudnn_handle(), ptr)

    def gpu(self) -> Any:
        """The GPU's watch (clocks, power, capping, the rest wait), or None where NVML is absent."""
        if self._gpu is None:
            import torch

            from .telemetry import Nvml

            self._gpu = Nvml.open(torch.cuda.current_device())
        return None if isinstance(self._gpu, str) else self._gpu

    def bench(self) -> Bench:
        self._warmed()
        env = self.environment()
        return Bench(
            self.cudnn_handle(),
            self._set_stream,
            env.l2_bytes,
            self._progress,
            self.gpu(),
            env.cudnn_backend_version,
        )

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
        self._progress = self._remembering(progress or (lambda _text: None))
        t0 = time.perf_counter()
        env = self.environment()
        base = dict(config=config, environment=env, device="cuda" if env.gpu_available else "cpu")
        issues, withheld = self._withheld(config, options, env, base)
        if withheld is not None:
            return withheld
        refusals = () if options.run_anyway or not env.gpu_available else known_issues.refusals(issues)
        known = known_issues.not_built_words(refusals, env.cudnn_backend_version) if refusals else ""
        self._warmed()  # before anything is built: a build may capture (the frontend's own engines)
        try:
            passes, hit, status, message = self._passes(config, options, env, known)
        except Cancelled as stop:  # at a step boundary: nothing half-measured is shown
            if not self._cache.get(config):
                self._cache.pop(config, None)  # nothing built: the next run is no cache hit
            words = f"stopped while {self._doing or 'starting'}: {stop.why}"
            return RunResult(
                status=STATUS_CANCELLED, message=words, wall_seconds=time.perf_counter() - t0, **base
            )
        status, message = _first_failure(passes, status, message)
        if status == STATUS_MISMATCH:  # a known wrong result says so, not a bare failure
            message = known_issues.known_wrong_words(issues, message)
        return RunResult(
            status=status,
            message=message,
            cache_hit=hit,
            passes=tuple(passes),
            wall_seconds=time.perf_counter() - t0,
            crash=self.lost if status == STATUS_CRASH else None,
            known_issues=issues,
            **base,
        )

    def _withheld(
        self, config: SdpaConfig, options: RunOptions, env: Environment, base: dict[str, Any]
    ) -> tuple[tuple[KnownIssueMatch, ...], RunResult | None]:
        """The known issues the config meets, and the result of a run not started: a configuration
        or options the rules refuse (checked before anything reads them: FLOPs, known issues, the
        graph), a known issue not run anyway, or a lost CUDA context."""
        errors = [*validate(config, env.gpu_memory_bytes if env.gpu_available else None), *options.problems()]
        if errors:
            return (), RunResult(
                status=STATUS_INVALID,
                message="; ".join(e.message for e in errors),
                errors=tuple({"field": e.field, "message": e.message} for e in errors),
                **base,
            )
        issues = known_issues.matching(config, env, recorded_issues())
        # a known crash is withheld; a refusal's graph is not built (the peers still run); a wrong result runs
        if env.gpu_available and not options.run_anyway and known_issues.crashes(issues):
            words = known_issues.not_run_words(issues)
            return issues, RunResult(status=STATUS_KNOWN_ISSUE, message=words, known_issues=issues, **base)
        if self.lost is not None:
            words = f"the CUDA context was lost earlier ({self.lost.error}): this engine runs nothing more"
            return issues, RunResult(status=STATUS_ERROR, message=words, **base)
        return issues, None

    def _passes(
        self, config: SdpaConfig, options: RunOptions, env: Environment, known: str
    ) -> tuple[list[PassResult], bool, str, str]:
        """Each pass measured on the GPU, or as far as the CPU takes it: cuDNN's own validation of its
        graph (no GPU needed), then torch's pass checked on the CPU (cpu.py); a graph cuDNN refuses
        ends the run (a cancel goes through). The passes, whether the engine's cache had them, and
        the status and message before their verdicts. `known`: why cuDNN's graphs are not built
        (the known refusals met and not run anyway)."""
        try:
            if env.gpu_available:
                passes, hit = self._run_gpu(config, options, known)
                return passes, hit, STATUS_OK, ""
            reason, passes = env.unavailable_reason, []
            for spec in passes_of(config):  # without a GPU: validated, then checked on the CPU
                self._progress(
                    f"validating the {spec.kind}" + (" and checking on the CPU" if options.check else "")
                )
                what = counts(spec, config)
                try:
                    g = define_and_validate(config, backward=spec.kind == BACKWARD)
                except GraphBuildError as exc:
                    refused = exc.result(**what)
                    passes.append(peers_not_run(refused, config, options, reason))
                    break
                passes.append(cpu_pass(spec, config, g, what, options, reason, self._progress))
            return passes, False, STATUS_CPU_ONLY, f"GPU figures unavailable: {reason}"
        except Exception as exc:  # a failure is a result to show, not a crash
            return [], False, STATUS_ERROR, f"{type(exc).__name__}: {exc}"

    def search(
        self, config: SdpaConfig, options: Any = None, progress: Callable[[str], None] | None = None
    ) -> Any:
        """A knob search of the forward of `config` (knob_trials.py): a SearchResult, never a raise."""
        from ..model.search_results import SearchOptions
        from .knob_trials import run_search

        return run_search(
            self, config, options or SearchOptions(), self._remembering(progress or (lambda _t: None))
        )

    def _remembering(self, progress: Callable[[str], None]) -> Callable[[str], None]:
        """Report progress, and keep the words: they say what a crash interrupted."""

        def report(text: str) -> None:
            self._doing = text
            progress(text)

        return report

    # ---- GPU mode ---------------------------------------------------------------------------
    def _run_gpu(
        self, config: SdpaConfig, options: RunOptions, known: str = ""
    ) -> tuple[list[PassResult], bool]:
        """Measure each pass; a later pass reads what the earlier ones' heuristic plans wrote.
        A pass cuDNN declines (or is `known` to refuse: its graph not built) keeps cuDNN's words
        and still runs its reference and peers (measure.measure_declined), and so does each pass
        after it; a pass that fails ends the run with what was measured so far."""
        if not options.plan_cache:  # --no-cache: every plan built afresh, not what a run here left
            self._cache.pop(config, None)
        hit = config in self._cache
        built = self._cache.setdefault(config, {})
        self._cache.move_to_end(config)
        results: list[PassResult] = []
        declined: dict[str, BuiltPass] = {}  # the passes cuDNN declined, their tensors made for the peers
        specs = passes_of(config)
        for spec in specs:
            try:
                results.append(self._pass(config, spec, options, built, declined, known, spec is specs[-1]))
            except Exception as exc:  # a failure is a result to show, not a crash
                what = counts(spec, config)
                if isinstance(exc, GraphBuildError):  # not cuDNN's refusal: a failure
                    results.append(exc.result(**what))
                elif faults.sticky(exc):  # the run ends here: nothing the engine built is usable any more
                    self.lost, crashed = faults.lost(exc, self._doing or f"measuring the {spec.kind}", what)
                    results.append(crashed)
                    break
                else:
                    results.append(
                        PassResult(status=STATUS_ERROR, message=f"{type(exc).__name__}: {exc}", **what)
                    )
            if results[-1].status not in (*GOOD_STATUSES, STATUS_MISMATCH) and spec.kind not in declined:
                break
        if not built:
            self._cache.pop(config, None)  # nothing built (or the context was lost): nothing to keep
        self._evict()
        return results, hit

    def _pass(
        self,
        config: SdpaConfig,
        spec: Pass,
        options: RunOptions,
        built: dict[str, BuiltPass],
        declined: dict[str, BuiltPass],
        known: str,
        last: bool,
    ) -> PassResult:
        """One pass measured: built and timed, or, where cuDNN declines it (or is known to, or
        declined the pass it reads), its refusal with the reference and the peers run on the
        pass's tensors (kept in `declined` for a later pass to read)."""
        declined_by = None
        if not (known or declined):
            try:
                this = self._built(config, spec, built, options.seed, options.plan_cache)
            except GraphBuildError as exc:
                if not exc.unsupported:
                    raise
                declined_by = exc  # cuDNN's refusal: its words are the pass's
            else:
                bench = self.bench()
                result = measure(spec, this, built, options, bench, last)
                if spec.kind == FORWARD:  # its equivalent forms, where it has any (engine/forms.py)
                    forms = equivalent_forms(config)
                    result = measure_forms(
                        forms, this, result, options, bench, lambda c: self._form(c, options)
                    )
                return result
        result, made = measure_declined(
            spec, config, declined_by, known, {**built, **declined}, options, self.bench()
        )
        if made is not None:
            declined[spec.kind] = made
        return result

    def _form(self, form: SdpaConfig, options: RunOptions) -> BuiltPass:
        """The forward of an equivalent form, built as its own configuration (kept in the cache)."""
        built = self._cache.setdefault(form, {})
        try:
            return self._built(form, FORWARD_PASS, built, options.seed, options.plan_cache)
        finally:
            if not built:
                self._cache.pop(form, None)

    @property
    def lost(self) -> Crash | None:
        """The crash that lost the CUDA context, once one has: this engine is done."""
        return self._lost

    @lost.setter
    def lost(self, crash: Crash | None) -> None:
        """Once the context is lost nothing the engine built is usable any more: its cache goes."""
        self._lost = crash
        if crash is not None:
            self._cache.clear()

    def lose_context(self) -> RunResult:
        """Lose the CUDA context on purpose (the soak's injected fault): the seed's forward
        executed with its query at an unmapped address. The result is the crash it causes."""
        self._warmed()
        config, t0 = SdpaConfig(), time.perf_counter()
        spec = passes_of(config)[0]
        built = self._cache.setdefault(config, {})
        try:
            faults.poison_context(self._built(config, spec, built, 0), self.cudnn_handle())
            passes = [PassResult(status=STATUS_ERROR, message="the context survived", **counts(spec, config))]
        except Exception as exc:
            self.lost, crashed = faults.lost(
                exc, self._doing or f"measuring the {spec.kind}", counts(spec, config)
            )
            passes = [crashed]
        return RunResult(config=config, status=passes[0].status, message=passes[0].message,
                         passes=tuple(passes), environment=self.environment(), device="cuda",
                         wall_seconds=time.perf_counter() - t0, crash=self.lost)  # fmt: skip

    def _built(
        self, config: SdpaConfig, spec: Pass, built: dict[str, BuiltPass], seed: int, cached: bool = True
    ) -> BuiltPass:
        """The pass built on the GPU: its graph with every plan built (from the cache when it was
        built before; its plans from the plan cache on disk when `cached` and built in an earlier
        process), its tensors, its FP8 scales set."""
        if spec.kind in built:
            return built[spec.kind]
        import torch

        self._progress(f"building the {spec.kind}")
        if cached and self.plans is None:
            self.plans = PlanCache()
        plans = self.plans if cached else None
        if plans is not None:
            plans.notes.clear()  # what this build has to say only, not a build that failed
        machine = fingerprint(self.environment())
        g = build(config, self.cudnn_handle(), backward=spec.kind == BACKWARD, cache=plans, machine=machine)
        this = BuiltPass(spec.kind, g, spec.tensors(config, seed, built), workspace(torch, g))
        if plans is not None and plans.notes:  # what the plan cache had to say, said once
            this.cache_notes, plans.notes[:] = tuple(plans.notes), []
        Measurement(spec, this, built, self.bench()).scale()
        built[spec.kind] = this
        return this

    def _evict(self) -> None:
        import torch

        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
            torch.cuda.empty_cache()

    def built_passes(self, config: SdpaConfig) -> dict[str, BuiltPass]:
        """The passes of `config` as its last run built them (a knob search starts from them)."""
        return self._cache[config]

    def clear_cache(self) -> None:
        self._cache.clear()

    def executor(self, config: SdpaConfig, kind: str = FORWARD) -> Callable[[], None]:
        """One execute() of a pass's heuristic plan for a config already run: what a user's code
        would call, for the profiler and benchmarks to measure."""
        self._warmed()
        built = self._cache[config]
        if kind not in built:
            raise KeyError(f"no {kind} graph was run for {config.label()}")
        return self._measurement(config, kind).run_plan(built[kind].graph.chosen)

    def output(self, config: SdpaConfig, name: str = "o") -> Any:
        """A tensor (logical b, h, s, d) the last execution of a config already run wrote:
        o, or with a backward dQ, dK, dV; FP8 values dequantised."""
        built = self._cache[config]
        return next(b for b in reversed(built.values()) if name in b.data).values(name)

    def _measurement(self, config: SdpaConfig, kind: str) -> Measurement:
        built = self._cache[config]
        spec = next(s for s in passes_of(config) if s.kind == kind)
        return Measurement(spec, built[kind], built, self.bench())


def _first_failure(passes: list[PassResult], status: str, message: str) -> tuple[str, str]:
    """The run's status and message: those of its first pass that failed, where one did."""
    failed = next((p for p in passes if p.status not in GOOD_STATUSES), None)
    if failed is None:
        return status, message
    return failed.status, failed.message if failed.kind == FORWARD else f"{failed.kind}: {failed.message}"
