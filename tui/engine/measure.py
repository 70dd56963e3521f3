"""One path that times and checks any pass on the GPU: every plan's kernel time, each output
against the fp32 reference and the peer, and the verdict; and, for a pass cuDNN declines, the
reference and the peers run on its tensors without it (measure_declined). It knows a pass only
through passes.Pass, so a new pass is measured the way the forward and the backward are."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import pins
from ..model.config import SdpaConfig
from ..model.options import TimingOptions
from ..model.rates import bandwidth_gbs, tflops
from ..model.results import OutputCheck, PassResult, PlanResult, TimingStats
from ..model.statuses import FORWARD, STATUS_KNOWN_ISSUE, STATUS_MISMATCH, STATUS_OK, STATUS_UNSUPPORTED
from . import faults, fp8
from .graph import GraphBuildError
from .independent import INDEPENDENT_NAME, cross_check, fp64_reference
from .passes import BuiltPass, Inputs, Pass
from .tensors import dropout_mask
from .timing import host_overhead_calls, host_overhead_us, kernel_time
from .tolerances import compare


@dataclass(frozen=True)
class Bench:
    """What measuring needs from the Engine: the cuDNN handle, the stream switch kernel timing
    uses, the L2 size (for the flush), where progress is reported, the GPU's watch
    (telemetry; None where NVML is not available), and the device the tensors live on."""

    handle: Any
    set_stream: Callable[[int], None]
    l2_bytes: int | None
    progress: Callable[[str], None]
    gpu: Any = None
    cudnn_version: str = ""  # the backend's, as a pinned plan's note names it
    device: str = "cuda"


def counts(spec: Pass, config: SdpaConfig) -> dict[str, Any]:
    """What a PassResult says of the config whatever happened: the pass, its FLOPs and bytes."""
    return dict(
        kind=spec.kind,
        flops=spec.flops(config),
        flops_rule=spec.flops_rule,
        io_bytes=spec.io_bytes(config),
        deterministic=config.deterministic and spec.repeat_check,
    )


def poison(t: Any) -> None:
    """Fill with NaN, so an element a plan never wrote cannot pass the check."""
    import torch

    if t.element_size() == 1:  # E4M3's NaN is 0x7f
        t.view(torch.uint8).fill_(0x7F)
    else:
        t.fill_(float("nan"))


def plan_name(plans: list[PlanResult] | tuple[PlanResult, ...], index: int | None) -> str:
    return next((p.name for p in plans if p.index == index), f"#{index}")


class Measurement:
    """Measuring one built pass: running a plan, reading its outputs, checking them."""

    def __init__(self, spec: Pass, built: BuiltPass, before: dict[str, BuiltPass], bench: Bench):
        self.spec, self.built, self.before = spec, built, before
        self.bench = bench  # the engine's, whatever the pass
        self.cross_check = False  # each output also against the fp64 reference (RunOptions.cross_check)
        self.config = built.config

    def run_plan(self, index: int | None) -> Callable[[], None]:
        return self.built.graph.runner(index, self.built.data, self.built.workspace, self.bench.handle)

    def execute_once(self, index: int | None, why: str) -> None:
        """One execution of a plan, waited for: a fault that loses the context is named as this plan's."""
        name = plan_name(self.built.graph.plans, index)
        during = f"{why}: plan {name} of the {self.spec.kind}"
        faults.execute_once(self.run_plan(index), during, name)

    def outputs_of(self, index: int | None) -> dict[str, Any]:
        """One execution of a plan; its outputs as the numbers they stand for."""
        keys = self.spec.output_keys(self.config)
        for key in keys.values():
            poison(self.built.data[key])  # an output the plan never wrote cannot pass
        self.execute_once(index, "checking")
        return {name: self.built.values(key) for name, key in keys.items()}

    def scale(self) -> None:
        """FP8 outputs: set their scales from a warm-up execution's amax (once per built pass)."""
        if self.spec.needs_scaling(self.config):
            self.bench.progress(f"scaling the {self.spec.kind}")
            index = self.built.graph.chosen
            fp8.delayed_scaling(
                lambda: self.execute_once(index, "the first execution (FP8 scaling)"),
                self.built.data,
                self.spec.fp8_delayed,
            )

    def inputs(self) -> Inputs:
        """q, k, v, bias (and dO) as the graph computes with them, and the dropout mask cuDNN drew."""
        b, config = self.built, self.config
        mask = None
        if config.dropout:
            forward = b if self.spec.kind == FORWARD else self.before[FORWARD]
            if forward.dropout_mask is None:
                forward.dropout_mask = dropout_mask(forward, self.bench.handle)
            mask = forward.dropout_mask
        d_o = b.values("dO") if "dO" in b.data else None
        sink = b.data.get("sink_token")
        o = b.values("o") if d_o is not None else None  # a backward reads O as the forward stored it
        inputs = Inputs(b.values("q"), b.values("k"), b.values("v"), b.data.get("bias"), d_o, mask, sink, o)
        return inputs.real_parts(config)  # an input recipe's fill is never read by the check

    def prepare_check(self) -> None:
        """The reference, tolerances and the peer's error: computed once per built pass, kept for reruns."""
        spec, b, config = self.spec, self.built, self.config
        inputs = self.inputs()
        words = "autograd" if spec.grad else "reference"
        b.reference = spec.reference(
            config,
            inputs,
            lambda share: self.bench.progress(f"checking the {spec.kind}: {words} {share:.0%}"),
        )
        b.tolerances = {name: spec.tolerance(config, name, ref, inputs) for name, ref in b.reference.items()}
        peer = spec.peer(config, inputs)  # named by the torch backend that ran it (None: no peer)
        rows = spec.rows(config, self.bench.device)
        ran = peer is not None and peer.outputs is not None
        b.peer_metrics = (
            {
                name: {peer.name: compare(peer.outputs[name], ref, *b.tolerances[name], rows[name])}
                for name, ref in b.reference.items()
                if name in peer.outputs  # the softmax's row outputs are cuDNN's alone
            }
            if ran
            else {}
        )
        b.peers = {peer.name: peer.description} if ran else {}
        b.peer_notes = peer.notes if peer is not None else ()
        if spec.kind == FORWARD and not config.backward:
            b.dropout_mask = None  # no later pass needs it

    def prepare_fp64(self) -> None:
        """The fp64 cross-check's reference of every checked output, once per built pass (independent.py)."""
        spec, b = self.spec, self.built
        self.bench.progress(f"cross-checking the {spec.kind} in fp64")
        b.fp64, why = fp64_reference(self.config, spec.grad, self.inputs(), tuple(b.reference or ()))
        b.fp64_notes = (why or f"cross-checked against {INDEPENDENT_NAME}",)

    def check(self, outputs: dict[str, Any]) -> tuple[OutputCheck, ...]:
        b, rows = self.built, self.spec.rows(self.config, self.bench.device)
        fp64 = (b.fp64 or {}) if self.cross_check else {}
        return tuple(
            OutputCheck(
                name,
                *b.tolerances[name],
                compare(got, b.reference[name], *b.tolerances[name], rows[name]),
                b.peer_metrics.get(name, {}),
                *(
                    cross_check(got, b.reference[name], fp64[name], *b.tolerances[name], rows[name])
                    if name in fp64
                    else (None, None)
                ),
            )  # fmt: skip
            for name, got in outputs.items()
        )

    def repeats(self, options: Any) -> tuple[bool | None, tuple[str, ...]]:
        """Whether two executions of the pass's plan write the same bits (None: not asked), and a
        note naming the outputs that differ: one wrong output must not hide behind right ones."""
        if not (options.check and self.spec.repeat_check):
            return None, ()
        first = {name: t.clone() for name, t in self.outputs_of(self.built.graph.chosen).items()}
        second = self.outputs_of(self.built.graph.chosen)
        differ = ", ".join(n for n in first if not bool((first[n] == second[n]).all().item()))
        return not differ, (f"not repeatable: {differ} differed between two executions",) * bool(differ)


def measure(
    spec: Pass, built: BuiltPass, before: dict[str, BuiltPass], options: Any, bench: Bench, last: bool = True
) -> PassResult:
    """Check the heuristic's plan, time every plan that built (or only the pick without
    autotune), and say whether the pass is right; unless `last`, run the heuristic's plan once
    more, since the next pass reads what it writes (o, stats)."""
    m = Measurement(spec, built, before, bench)
    m.cross_check = options.check and options.cross_check
    config, g = m.config, built.graph
    what = counts(spec, config)  # what the pass is, whatever its verdict
    checks = _check_chosen(m, options, what)
    repeatable, repeat_notes = m.repeats(options)

    def check_plan(index: int) -> tuple[float, bool]:
        plan_checks = checks if index == g.chosen else m.check(m.outputs_of(index))
        return max(c.cudnn.max_abs for c in plan_checks), all(c.passed for c in plan_checks)

    label = "plan" if spec.kind == FORWARD else f"{spec.kind} plan"
    plans, fastest = time_plans(
        g.plans,
        {g.heuristic_index, g.chosen},
        m.run_plan,
        options,
        spec.flops(config),
        check_plan if checks else None,
        bench,
        label,
    )
    timing = next((p.timing for p in plans if p.index == g.chosen), None)
    pin_notes = _pin_notes(m, plans)
    references = amax_references(spec, built) if config.fp8 else {}
    field_peers: tuple = ()
    if options.peers:
        from .peer_runs import measure_peers

        field_peers, errors = measure_peers(m, options.peers, options)
        checks = tuple(dataclasses.replace(c, peers={**c.peers, **errors.get(c.output, {})}) for c in checks)
    result = PassResult(
        phases=tuple(g.phases),
        plans=tuple(plans),
        heuristic_plan=g.heuristic_index,
        fastest_plan=fastest,
        pinned_plan=g.pinned_index,
        timing=timing,
        **_rates(m, timing),
        reference=spec.reference_name if checks else "",
        check_device="cuda" if checks else "",
        checks=checks,
        peers={**built.peers, **{p.name: p.description for p in field_peers if p.ran}},
        field_peers=field_peers,
        repeatable=repeatable,
        fp8=fp8.scaling(built.data, spec.fp8_scales, spec.fp8_amax, references) if config.fp8 else None,
        notes=(
            *pin_notes,
            *((*spec.notes(config), *built.peer_notes) if checks else ()),
            *built.cache_notes,
            *built.check_notes,
            *(built.fp64_notes if m.cross_check else ()),
            *repeat_notes,
        ),  # fmt: skip
        graph_json=g.described or g.json(),
        **what,
    )
    if not last:
        m.run_plan(g.chosen)()
    return dataclasses.replace(result, **verdict(result))


def _check_chosen(m: Measurement, options: Any, what: dict[str, Any]) -> tuple[OutputCheck, ...]:
    """The checks of the plan the pass runs (none unless asked, nor where the dropout mask cuDNN
    dumped is not the one it applied), its reference made once per built pass. `what`: the pass's
    counts (its FLOPs tell a forward's kept positions)."""
    if not options.check:
        return ()
    m.bench.progress(f"checking the {m.spec.kind}")
    if m.built.reference is None:
        m.prepare_check()
    forward = m.built if m.spec.kind == FORWARD else m.before.get(FORWARD, m.built)
    if m.spec.kind == FORWARD and forward.mask_ones is not None:  # its FLOPs count its kept positions
        positions = what["flops"] // (2 * (m.config.d_qk + m.config.d_v))
        forward.mask_shortfall = mask_shortfall(m.config.dropout, positions, forward.mask_ones)
    if forward.mask_shortfall:  # the reference applied a mask the kernel did not: nothing to check
        m.built.check_notes = (*dict.fromkeys((*m.built.check_notes, forward.mask_shortfall)),)
        return ()
    if m.cross_check and m.built.fp64 is None:  # never unless asked: fp64 math is the costliest check
        m.prepare_fp64()
    return m.check(m.outputs_of(m.built.graph.chosen))


def _pin_notes(m: Measurement, plans: list[PlanResult]) -> tuple[str, ...]:
    """What became of the config's pinned plan, beside the heuristic's pick (a pin is the forward's)."""
    config, g = m.config, m.built.graph
    if not (config.plan and m.spec.kind == FORWARD):
        return ()
    version = m.bench.cudnn_version
    return (pins.note(config.plan, plans, g.heuristic_index, g.pinned_index, g.pin_error, version),)


def _rates(m: Measurement, timing: TimingStats | None) -> dict[str, Any]:
    """What the kernel time of the plan the pass runs makes of it: the host overhead of its
    execute(), TFLOP/s and bandwidth (None where it was not timed)."""
    if not timing:
        return dict(host_overhead_us=None, tflops=None, bandwidth_gbs=None)
    spec, config = m.spec, m.config
    return dict(
        host_overhead_us=host_overhead_us(
            m.run_plan(m.built.graph.chosen), host_overhead_calls(timing.median_us)
        ),
        tflops=tflops(spec.flops(config), timing.median_us),
        bandwidth_gbs=bandwidth_gbs(spec.io_bytes(config), timing.median_us),
    )


def amax_references(spec: Pass, built: BuiltPass) -> dict[str, Any]:
    """Each amax the graph writes beside the reference tensor whose maximum it should equal."""
    if built.reference is None:
        return {}
    by_output = {f"amax_{key.lower()}": name for name, key in spec.output_keys(built.graph.config).items()}
    return {amax: built.reference[by_output[amax]] for amax in spec.fp8_amax if amax in by_output}


def verdict(result: PassResult) -> dict[str, str]:
    """The pass's status and, when it failed, why in one sentence."""
    worst = result.worst_check()
    if worst is not None:
        e = worst.cudnn
        what = "fp32 autograd" if result.reference.startswith("fp32 autograd") else "the fp32 reference"
        return dict(
            status=STATUS_MISMATCH,
            message=(
                f"{worst.output} differs from {what}: max abs error {e.max_abs:.3g} ({e.mismatched} of {e.total} "
                f"elements outside atol {worst.atol:.3g} + rtol {worst.rtol:g}·|ref|)"
            ),
        )
    if result.deterministic and result.repeatable is False:
        return dict(
            status=STATUS_MISMATCH,
            message=f"the deterministic {result.kind} gave different outputs on two executions",
        )
    return dict(status=STATUS_OK, message="")


# A dumped dropout mask (rng_dump) holds a 1 at each kept position the dropout keeps: about
# h_q * kept_pairs * (1 - p) ones, a binomial count. On the H200 (cuDNN 9.19) a one-query graph's
# mask left three quarters of it unwritten while its O agreed with no dropout at p=0.01: a count
# this many standard deviations short is not the mask the kernel applied (docs/BENCHMARKS.md).
MASK_SHORTFALL_SIGMAS = 8


def mask_shortfall(p: float, positions: int, ones: float) -> str:
    """Why a dumped dropout mask with `ones` ones over `positions` kept (query, key) positions is not
    the mask cuDNN applied: far fewer ones than positions times 1 - p ('' where it is likely)."""
    expected = positions * (1 - p)
    sigma = (positions * p * (1 - p)) ** 0.5
    if not p or ones >= expected - MASK_SHORTFALL_SIGMAS * sigma - 1:
        return ""
    return (
        f"dropout: the mask cuDNN's graph dumped keeps {ones / positions:.1%} of the {positions:,} kept "
        f"positions where p={p:g} keeps {1 - p:.0%}: not the mask its kernel applied, so the outputs "
        "that depend on it are not checked"
    )


# ---- a pass cuDNN declined ----------------------------------------------------------------
NOTE = "cuDNN did not run this pass: the fp32 reference and the peers ran on its tensors without it"
AFTER_DECLINED = "not built: it reads the O and softmax stats of cuDNN's forward, which cuDNN declined"
DROPOUT_NOTE = (
    "dropout on: its mask is drawn by cuDNN's graph, which did not run, so no peer can be checked without it"
)


def measure_declined(
    spec: Pass,
    config: SdpaConfig,
    declined_by: GraphBuildError | None,
    known: str,
    before: dict[str, BuiltPass],
    options: Any,
    bench: Bench,
) -> tuple[PassResult, BuiltPass | None]:
    """A pass cuDNN declines, measured without it: cuDNN's refusal stays the pass's (its status, its
    words, the phase that refused: `declined_by`, where cuDNN declined its graph; else the graph is
    not built, for the `known` refusal's words or since cuDNN declined the pass it reads), and on the
    tensors the graph would have read the fp32 reference, the torch peer and the peers asked for
    run as they do beside a built graph (where checking or asked). So a variant cuDNN refuses still
    shows against Flex and FA4, in the Peers pane and the fastest way. Also the tensors made, for a
    later pass to read (None where nothing ran: nothing asked, or dropout, whose mask only cuDNN's
    graph draws). A backward whose forward cuDNN declined is not built either: it reads the
    forward's O and softmax stats, which no cuDNN graph wrote; its peers run on the forward's
    tensors and their own dO."""
    asked, what, made = options.check or options.peers, counts(spec, config), None
    if asked and not config.dropout:
        bench.progress(f"the {spec.kind} without cuDNN: its tensors, the reference and the peers")
        data = spec.tensors(config, options.seed, before, bench.device)
        made = BuiltPass(spec.kind, None, data, None, config=config)
        m = Measurement(spec, made, before, bench)
        if options.check:
            bench.progress(f"checking the {spec.kind}'s peers")
            m.prepare_check()
        field_peers: tuple = ()
        errors: dict[str, dict[str, Any]] = {}
        if options.peers:
            from .peer_runs import measure_peers

            field_peers, errors = measure_peers(m, options.peers, options)
        checks = tuple(  # each output some peer wrote, against the reference: no error of cuDNN's
            OutputCheck(name, *made.tolerances[name], None, peers)
            for name in made.reference or {}
            if (peers := {**made.peer_metrics.get(name, {}), **errors.get(name, {})})
        )
    if declined_by is not None:
        refusal = declined_by.result(**what)
    else:
        status, words = (STATUS_KNOWN_ISSUE, known) if known else (STATUS_UNSUPPORTED, AFTER_DECLINED)
        refusal = PassResult(status=status, message=words, **what)
    if made is None:  # nothing asked, or dropout, whose mask only cuDNN's graph draws
        return (
            dataclasses.replace(refusal, notes=(*refusal.notes, DROPOUT_NOTE)) if asked else refusal
        ), None
    result = dataclasses.replace(
        refusal,
        reference=spec.reference_name if checks else "",
        check_device=bench.device if checks else "",
        checks=checks,
        peers={**made.peers, **{p.name: p.description for p in field_peers if p.ran}},
        field_peers=field_peers,
        notes=(*refusal.notes, NOTE, *spec.notes(config), *made.peer_notes),
    )
    return result, made


def time_plans(
    candidates: list[PlanResult],
    always: set[int | None],
    run_plan: Callable[[int], Callable[[], None]],
    options: Any,
    flops: int,
    check_plan: Callable[[int], tuple[float, bool]] | None,
    bench: Bench,
    what: str,
) -> tuple[list[PlanResult], int | None]:
    """Kernel time (and, when checking, the error) of every plan that built, or without autotune
    only of those `always` names (the heuristic's pick and the pinned plan); the index of the fastest."""
    plans: list[PlanResult] = []
    timings: dict[int, TimingStats] = {}
    opts: TimingOptions = options.timing
    for plan in candidates:
        if not plan.built or not (options.autotune or plan.index in always):
            plans.append(plan)
            continue
        changes: dict[str, Any] = {}
        bench.progress(f"timing {what} {plan.index + 1} of {len(candidates)}")
        try:
            faults.execute_once(run_plan(plan.index), f"the first execution of {what} {plan.name}", plan.name)
            stats = kernel_time(run_plan(plan.index), bench.set_stream, opts, bench.l2_bytes, bench.gpu)
            timings[plan.index] = stats
            changes.update(timing=stats, tflops=tflops(flops, stats.median_us))
            if check_plan is not None:
                max_abs, ok = check_plan(plan.index)
                changes.update(max_abs_error=max_abs, matches=ok)
        except Exception as exc:
            if faults.sticky(exc):  # every later plan would fail alike: the run ends here
                raise
            changes.update(build_error=f"timing failed: {type(exc).__name__}: {exc}")
        plans.append(dataclasses.replace(plan, **changes))
    fastest = min(timings, key=lambda i: timings[i].median_us) if timings else None
    return [dataclasses.replace(p, is_fastest=(p.index == fastest)) for p in plans], fastest
