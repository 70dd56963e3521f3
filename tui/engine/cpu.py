"""Without a usable GPU, what can still be done for a pass once cuDNN's own validation of its graph
passed (the frontend's validate() runs without a GPU and gives its real messages: runner.py asks
it): the graph's JSON, FLOPs and bytes, and torch's own low-precision SDPA on the CPU checked
against the same fp32 reference, for problems small enough to finish in seconds: the GPU's peer,
chosen the same way (the first of torch's FLASH, EFFICIENT and MATH backends for the CPU that runs
it), and named by the backend that ran."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..model.config import SdpaConfig
from ..model.inputs import recipe_of
from ..model.options import RunOptions
from ..model.results import OutputCheck, PassResult, PeerResult
from ..model.statuses import STATUS_CPU_ONLY
from .fp8 import dequantise, quantise
from .graph import SdpaGraph
from .independent import INDEPENDENT_NAME, fp64_reference
from .passes import Inputs, Pass, recipe_notes
from .reference import drawn_values
from .tolerances import compare, output_tolerance

CPU_REFERENCE_MAX_FLOPS = 4e9  # a few seconds of fp32 math on a small CPU


def cpu_inputs(config: SdpaConfig, seed: int) -> Inputs:
    """The CPU check's inputs, drawn as on the GPU (the input recipe's seed and magnitudes; its fill
    goes where only cuDNN's graph reads, on the GPU); FP8 values quantised, then dequantised to fp16."""
    drawn = drawn_values(config, "cpu", recipe_of(config).seed_for(seed))
    q, k, v = (drawn[name] for name in ("q", "k", "v"))
    if config.fp8:
        q, k, v = (dequantise(*quantise(x)).half() for x in (q, k, v))
    d_o = drawn["dO"].to(q.dtype) if config.backward else None
    return Inputs(q, k, v, drawn.get("bias"), d_o)


def cpu_pass(
    spec: Pass,
    config: SdpaConfig,
    g: SdpaGraph,
    what: dict[str, Any],
    options: RunOptions,
    reason: str,
    progress: Callable[[str], None],
) -> PassResult:
    """One pass without a GPU, its graph `g` validated (`what` says what the pass is: measure.counts;
    `reason`: why no GPU). `progress` hears how far the CPU reference is (it can take seconds); with
    the options' cross-check, the fp32 reference is checked against the fp64 one too (independent.py)."""
    validated = PassResult(status=STATUS_CPU_ONLY, phases=tuple(g.phases), graph_json=g.described, **what)
    result = peers_not_run(validated, config, options, reason)
    if not options.check:
        return result
    return dataclasses.replace(
        result, **cpu_check(spec, config, options.seed, reason, progress, options.cross_check)
    )


def peers_not_run(result: PassResult, config: SdpaConfig, options: RunOptions, reason: str) -> PassResult:
    """The pass's result with the peers asked for said, not silently dropped: they run on the GPU only."""
    if not options.peers:
        return result
    from .peers import ADAPTERS

    why = f"not run: peers are timed on the GPU only ({reason})"
    return dataclasses.replace(
        result, field_peers=tuple(PeerResult(ADAPTERS[k].name(config), reason=why) for k in options.peers)
    )


def fitting_batch(spec: Pass, config: SdpaConfig) -> int:
    """The largest batch whose CPU check fits the limit at full length (the cost grows with b)."""
    per_entry = spec.check_cost(config.replace(b=1, seq_lens_q=None, seq_lens_kv=None))
    return min(int(CPU_REFERENCE_MAX_FLOPS // per_entry), config.b) if per_entry else 0


def first_entries(config: SdpaConfig, b: int) -> SdpaConfig:
    """The first `b` batch entries of `config`, each with its real lengths."""
    q, kv = config.seq_lens_q, config.seq_lens_kv
    return config.replace(b=b, seq_lens_q=q[:b] if q else None, seq_lens_kv=kv[:b] if kv else None)


def cpu_check(
    spec: Pass,
    config: SdpaConfig,
    seed: int,
    reason: str,
    progress: Callable[[str], None] = lambda _t: None,
    cross: bool = False,
) -> dict[str, Any]:
    """torch's own pass on the CPU against the fp32 reference (dropout off: its mask is drawn on the
    GPU); with `cross`, the fp32 reference against the fp64 one as well (cuDNN has no output here)."""
    note = f"CPU only ({reason}): cuDNN's {spec.kind} did not run"
    cost, limit = spec.check_cost(config), f"the {CPU_REFERENCE_MAX_FLOPS / 1e9:.0f} GFLOP CPU limit"
    if cost > CPU_REFERENCE_MAX_FLOPS:
        fits = fitting_batch(spec, config)
        if fits < 1:
            note += f"; no CPU reference: {cost / 1e9:.1f} GFLOP, above {limit} (even b=1 does not fit: shorten s_q or s_kv)"
            return dict(notes=(note,))
        note += f"; checked on the first {fits} of {config.b} batch entries: all {config.b} are {cost / 1e9:.1f} GFLOP, above {limit}"
        config = first_entries(config, fits)
    plain = config.replace(dropout=0.0)
    inputs, recipe = cpu_inputs(plain, seed), recipe_of(config)
    said = recipe_notes(recipe, config.padded)  # what the input recipe did
    peer = spec.peer(plain, inputs)
    if peer is None:
        return dict(notes=(note, *spec.notes(plain)))
    if peer.outputs is None:
        return dict(notes=(note, *peer.notes))
    name = peer.name
    note += f"; torch's {name.removeprefix('torch ')} {spec.kind} on the CPU is checked instead"
    if config.dropout:
        note += " (dropout left off: its mask is drawn on the GPU)"
    if config.fp8:
        note += " (FP8: on the dequantised E4M3 inputs)"
    refs = spec.reference(
        plain, inputs, lambda share: progress(f"checking the {spec.kind} on the CPU: {share:.0%}")
    )
    rows = spec.rows(plain, "cpu")
    fp64, why = fp64_reference(plain, spec.grad, inputs, tuple(refs)) if cross else ({}, "")
    checks = []
    for output, ref in refs.items():
        if output not in peer.outputs:  # the softmax's row outputs are cuDNN's alone
            continue
        atol, rtol = output_tolerance(config, output, ref, inputs, spec.grad)
        against = compare(ref, fp64[output], atol, rtol, rows[output]) if output in fp64 else None
        peer_error = {name: compare(peer.outputs[output], ref, atol, rtol, rows[output])}
        checks.append(OutputCheck(output, atol, rtol, None, peer_error, reference_fp64=against))
    crossed = (why or f"the fp32 reference cross-checked against {INDEPENDENT_NAME}",) if cross else ()
    return dict(
        reference=spec.reference_name,
        check_device="cpu",
        checks=tuple(checks),
        notes=(note, *said, *crossed),
        peers={name: f"{peer.description} (CPU)"},
    )
