"""The forward in each equivalent form of its configuration (model/equivalents.py): the same
scores, which cuDNN plans afresh. Each form is built as its own configuration, given the very
tensors the configuration's forward read, its heuristic pick checked against the configuration's
own fp32 reference (same tolerances, same real rows) and timed in the same regime. Nothing is
built where the configuration has no equivalent form, which is most of them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..model.config import SdpaConfig
from ..model.equivalents import Equivalent
from ..model.rates import tflops
from ..model.results import FormResult, PassResult
from . import faults
from .graph import GraphBuildError
from .measure import Bench, Measurement, plan_name
from .passes import FORWARD_PASS, BuiltPass
from .timing import kernel_time

Build = Callable[[SdpaConfig], BuiltPass]  # a form's forward built (the engine's cache and plan cache)


def measure_forms(
    forms: tuple[Equivalent, ...],
    original: BuiltPass,
    result: PassResult,
    options: Any,
    bench: Bench,
    build: Build,
) -> PassResult:
    """The forward's result with `forms`, the equivalent forms of its configuration (equivalents.py),
    measured; as it was where there is none, or the forward itself was not timed."""
    if not forms or result.timing is None:
        return result
    config = original.config
    measured = tuple(_measured(config, original, eq, options, bench, build) for eq in forms)
    return dataclasses.replace(result, forms=measured)


def _changes(eq: Equivalent) -> dict[str, str]:
    return {name: "none" if value is None else str(value) for name, value in eq.changes}


def _measured(
    config: SdpaConfig, original: BuiltPass, eq: Equivalent, options: Any, bench: Bench, build: Build
) -> FormResult:
    """One form: built, given the configuration's inputs, checked and timed; or why not."""
    record = FormResult(changes=_changes(eq), why=eq.why)
    bench.progress(f"timing the equivalent form {eq.words()}")
    try:
        form = build(eq.config(config))
        _same_inputs(original, form)
        m = Measurement(FORWARD_PASS, form, {}, bench)
        index = form.graph.chosen
        outputs = m.outputs_of(index)
        timing = kernel_time(m.run_plan(index), bench.set_stream, options.timing, bench.l2_bytes, bench.gpu)
    except GraphBuildError as exc:
        return dataclasses.replace(record, reason=f"cuDNN does not build it: {faults.first_line(exc)}")
    except Exception as exc:
        if faults.sticky(exc):
            raise
        return dataclasses.replace(record, reason=f"{type(exc).__name__}: {faults.first_line(exc)}")
    checked = _checked(original, outputs, bench)
    return dataclasses.replace(
        record,
        plan=plan_name(form.graph.plans, index),
        timing=timing,
        tflops=tflops(FORWARD_PASS.flops(config), timing.median_us),
        max_abs_error=max((e.max_abs for e in checked), default=None),
        matches=all(e.passed for e in checked) if checked else None,
    )


def _same_inputs(original: BuiltPass, form: BuiltPass) -> None:
    """The form reads the configuration's own tensors: each of the same name, shape and dtype."""
    for name, tensor in form.data.items():
        mine = original.data.get(name)
        same = hasattr(mine, "copy_") and hasattr(tensor, "copy_")
        if same and mine.shape == tensor.shape and mine.dtype == tensor.dtype:
            tensor.copy_(mine)


def _checked(original: BuiltPass, outputs: dict[str, Any], bench: Bench) -> list:
    """The form's outputs checked as the configuration's own forward is: against its reference,
    in its tolerances, over its real rows (none where it was not checked)."""
    if original.reference is None or original.mask_shortfall:
        return []
    return [c.cudnn for c in Measurement(FORWARD_PASS, original, {}, bench).check(outputs)]
