"""The dashboard's panes, one widget a file, re-exported here; each module is imported when one
of its names is first asked for (the first screen needs only the form, the plans and the lines)."""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "AccuracyPane": "accuracy",
    "ConfigForm": "config_form",
    "EnvironmentPane": "environment",
    "ExplainPane": "explain",
    "GraphPane": "graph_json",
    "LatencyPane": "latency",
    "MaskPane": "mask",
    "PeersPane": "peers",
    "PhasesPane": "phases",
    "PlansPane": "plans",
    "StatusLine": "status",
    "SummaryPane": "summary",
    "SweepPane": "sweep",
}
__all__ = list(_MODULES)


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
