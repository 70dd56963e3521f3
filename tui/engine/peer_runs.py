"""Measuring the peers asked for (RunOptions.peers) the way a cuDNN plan is measured: on the
pass's own logical tensors, one execution waited for (a fault is named as the peer's), its output
against the same fp32 reference within the same tolerance, then kernel time from CUPTI over
CUDA-graph replays in the run's regime. A peer that cannot be captured in a CUDA graph is timed
by CUPTI over eager calls, and says so."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

from ..model.rates import bandwidth_gbs, tflops
from ..model.results import PeerResult
from ..model.statuses import BACKWARD
from . import faults
from .peer import refusal_reason
from .peers import ADAPTERS, Refused, Tensors
from .timing import kernel_time, profiler_kernel_time, summarize
from .tolerances import compare

EAGER_METHOD = "CUPTI kernel sum over eager calls (no CUDA graph: {why})"


def measure_peers(
    m: Any, keys: tuple[str, ...], options: Any, flops: int | None = None, io_bytes: int | None = None
) -> tuple:
    """(PeerResults, {output: {peer name: ErrorMetrics}}) for the pass measured by `m` (a
    measure.Measurement whose reference is ready when checking): the forward's O, or a backward's
    dQ, dK and dV for the same dO. Their rates are of the pass's FLOPs and bytes unless `flops`
    and `io_bytes` say other figures."""
    config, bench, kind = m.config, m.bench, m.spec.kind
    flops = m.spec.flops(config) if flops is None else flops
    io_bytes = m.spec.io_bytes(config) if io_bytes is None else io_bytes
    inputs = m.inputs().for_peer(config)
    stored = getattr(
        m.built, "data", None
    )  # the pages and tables the graph reads, for a peer that takes them
    tensors = Tensors(inputs.q, inputs.k, inputs.v, inputs.bias, inputs.sink, stored)
    results, errors = [], {}
    for key in keys:
        adapter = ADAPTERS[key]
        name = adapter.name(config)
        reason = adapter.unavailable() or adapter.refusal(config, kind)
        if reason:
            results.append(PeerResult(name, reason=reason))
            continue
        bench.progress(f"peer {name}: the {kind}")

        def prepare(adapter: Any = adapter) -> Any:
            if kind == BACKWARD:
                return adapter.prepare_backward(config, tensors, inputs.d_o)
            return adapter.prepare(config, tensors)

        result, outputs = _measure_one(prepare, name, options, bench)
        b = m.built
        if outputs is not None and b.reference is not None:
            rows = m.spec.rows(config, inputs.q.device)  # the real rows, where the tensors are
            for output, ref in b.reference.items():  # a peer writes O, or dQ, dK and dV
                got = outputs.get(output) if kind == BACKWARD else (outputs if output == "O" else None)
                if got is not None:
                    errors.setdefault(output, {})[name] = compare(
                        got, ref, *b.tolerances[output], rows[output]
                    )
        if result.timing is not None:
            median = result.timing.median_us
            result = replace(
                result, tflops=tflops(flops, median), bandwidth_gbs=bandwidth_gbs(io_bytes, median)
            )
        results.append(result)
    return tuple(results), errors


def _measure_one(prepare: Any, name: str, options: Any, bench: Any):
    """One peer: prepared, run once (its outputs kept), timed; or why it could not run."""
    import torch

    try:
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            prepared = prepare()
            out = prepared.outputs(_run_once(prepared.run, name))  # Prepared.logical applied, once
    except Refused as exc:
        return PeerResult(name, reason=str(exc)), None
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return PeerResult(name, reason="out of GPU memory"), None
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
        return PeerResult(name, reason=refusal_reason([str(w.message) for w in heard], exc)), None
    base = dict(name=name, description=prepared.description, compile_seconds=prepared.compile_seconds)
    why = prepared.uncapturable
    if not why:
        try:
            timing = kernel_time(prepared.run, lambda _ptr: None, options.timing, bench.l2_bytes, bench.gpu)
            if timing.method.startswith("cupti"):
                return PeerResult(**base, timing=timing), out
            why = "its graph's replays recorded no kernels"  # the capture missed its work
        except faults.ContextLost:
            raise
        except Exception as exc:  # capture refused (host syncs, a compiled guard)
            if faults.sticky(exc):
                raise faults.ContextLost(f"timing peer {name}", faults.first_line(exc), name) from exc
            why = faults.first_line(exc)[:80]
    torch.cuda.synchronize()
    us, _kernels = profiler_kernel_time(prepared.run)
    timing = summarize([us], 1, False, "cupti-eager")
    return PeerResult(**base, timing=timing, timing_method=EAGER_METHOD.format(why=why)), out


def _run_once(run: Any, name: str) -> Any:
    """One call waited for: a fault that loses the context is named as this peer's."""
    box: list[Any] = []
    faults.execute_once(lambda: box.append(run()), f"running peer {name}", name)
    return box[0]
