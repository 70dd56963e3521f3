"""Result files of schema 1.x (a forward with an optional `backward` beside it), read as
schema 2 dicts: the same figures laid out as passes, so files recorded by earlier versions
still open. Kept apart from results.py: nothing new is ever written this way."""

from __future__ import annotations

from typing import Any

from .config import BACKWARD_FLOPS_RULE, FP8_DTYPES
from .statuses import BACKWARD, FORWARD, SCHEMA_VERSION, STATUS_CPU_ONLY, STATUS_INVALID, STATUS_OK

_SHARED = (
    "phases",
    "plans",
    "heuristic_plan",
    "fastest_plan",
    "timing",
    "host_overhead_us",
    "flops",
    "io_bytes",
    "tflops",
    "bandwidth_gbs",
    "graph_json",
    "fp8",
)


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema 1.x result (a forward with an optional `backward` beside it) as a schema 2 dict:
    the same figures, laid out as passes, so files recorded by earlier versions still read."""
    config = data.get("config", {})
    peer = "torch " + ("fp16" if config.get("dtype") in FP8_DTYPES else config.get("dtype", "fp16"))
    passes = [] if data.get("status") == STATUS_INVALID else [_forward(data, peer)]
    if data.get("backward"):
        passes.append(_backward(data["backward"], data.get("device", ""), peer))
    keep = ("config", "status", "message", "errors", "device", "cache_hit", "environment", "wall_seconds")
    return {**{k: data[k] for k in keep if k in data}, "passes": passes, "schema_version": SCHEMA_VERSION}


def _forward(data: dict[str, Any], peer: str) -> dict[str, Any]:
    status, message = data.get("status", STATUS_OK), data.get("message", "")
    if data.get("backward") and message.startswith("backward: "):  # the run failed in its backward
        status, message = (STATUS_CPU_ONLY if data.get("device") == "cpu" else STATUS_OK), ""
    out = {k: data[k] for k in _SHARED if k in data}
    out.update(kind=FORWARD, status=status, message=message)
    acc = data.get("accuracy")
    if acc:
        peers = {peer: acc["torch_lowp"]} if acc.get("torch_lowp") else {}
        check = {
            "output": "O",
            "atol": acc["atol"],
            "rtol": acc["rtol"],
            "cudnn": acc.get("cudnn"),
            "peers": peers,
        }
        out.update(
            reference=acc.get("reference", ""),
            check_device=acc.get("device", ""),
            checks=[check],
            peers={peer: acc.get("torch_backend", "")} if peers else {},
            notes=[acc["note"]] if acc.get("note") else [],
        )
    return out


def _backward(b: dict[str, Any], device: str, peer: str) -> dict[str, Any]:
    out = {k: b[k] for k in _SHARED if k in b}
    names = [
        n for n in ("dQ", "dK", "dV") if n in b.get("gradients", {}) or n in b.get("torch_gradients", {})
    ]
    checks = [
        {
            "output": n,
            "atol": b.get("atol", {}).get(n, 0.0),
            "rtol": b.get("rtol", 0.0),
            "cudnn": b.get("gradients", {}).get(n),
            "peers": {peer: b["torch_gradients"][n]} if n in b.get("torch_gradients", {}) else {},
        }
        for n in names
    ]
    has_peer = any(c["peers"] for c in checks)
    status = b.get("status", STATUS_OK)
    out.update(
        kind=BACKWARD,
        status=status,
        message=b.get("message", ""),
        flops_rule=BACKWARD_FLOPS_RULE,
        reference=b.get("reference", ""),
        check_device=("cpu" if status == STATUS_CPU_ONLY else device) if checks else "",
        checks=checks,
        peers={peer: b.get("torch_backend", "")} if has_peer else {},
        deterministic=b.get("deterministic", False),
        repeatable=b.get("bitwise_repeatable"),
        notes=[b["note"]] if b.get("note") else [],
    )
    return out
