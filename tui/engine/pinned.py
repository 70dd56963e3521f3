"""A graph's pinned plan: the configuration's plan appended after the heuristic's list, and where
it ended up (run it when it built, else say why not)."""

from __future__ import annotations

from typing import Any

from ..model import pins
from .faults import first_line

NOT_MADE = "cuDNN would not make it"


def append_pinned(g: Any, cudnn: Any) -> int | None:
    """Append the config's pinned plan after the heuristic's list of `g` (an SdpaGraph); its index,
    or None (with `g.pin_error`) when cuDNN will not make it (an engine or knob it does not have)."""
    try:
        return pins.append_plan(g.graph, cudnn, g.config.plan or "")
    except Exception as exc:
        g.pin_error = f"{NOT_MADE}: {first_line(exc) or type(exc).__name__}"
        return None


def record_pinned(g: Any, index: int | None) -> None:
    """Where the pinned plan is in `g`: run it when it built, else say why not."""
    plan = next((p for p in g.plans if p.index == index), None)
    if plan is not None and plan.built:
        g.pinned_index = index
    elif plan is not None:
        g.pin_error = plan.build_error or "it did not build"
