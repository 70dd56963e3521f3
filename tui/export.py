"""Take a result away: a standalone reproduction script (repro.py), the RunResult as JSON, the
plans of every pass as CSV."""

from __future__ import annotations

import csv
import io

from .engine.config import SdpaConfig
from .engine.results import SCHEMA_VERSION, RunResult
from .repro import script

EXPORT_KINDS = {"script": ".py", "json": ".json", "csv": ".csv"}


def default_filename(config: SdpaConfig, kind: str) -> str:
    stem = "sdpa_" + config.label().replace(" ", "_").replace("/", "-")
    return stem + EXPORT_KINDS[kind]


PLAN_COLUMNS = (
    "config",
    "dtype",
    "layout",
    "pass",
    "plan_index",
    "plan_name",
    "engine_id",
    "knobs",
    "workspace_bytes",
    "built",
    "build_error",
    "build_seconds",
    "kernel_median_us",
    "kernel_p10_us",
    "kernel_p90_us",
    "l2_flushed",
    "tflops",
    "max_abs_error",
    "matches",
    "heuristic_pick",
    "fastest",
)
ENV_COLUMNS = (
    "gpu_name",
    "compute_capability",
    "driver_version",
    "cuda_runtime",
    "torch_version",
    "cudnn_backend_version",
    "torch_cudnn_version",
    "frontend_version",
)


def plans_csv(result: RunResult) -> str:
    """The plans table, one row a plan of each pass in turn, with the environment
    on every row so that runs from two machines can be concatenated and compared."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow((*PLAN_COLUMNS, *ENV_COLUMNS, "schema_version"))
    env = result.environment
    env_values = [getattr(env, c, "") if env else "" for c in ENV_COLUMNS]
    for kind, p in ((ps.kind, p) for ps in result.passes for p in ps.plans):
        t = p.timing
        writer.writerow(
            (
                result.config.label(),
                result.config.dtype,
                result.config.layout,
                kind,
                p.index,
                p.name,
                "" if p.engine_id is None else p.engine_id,
                ";".join(f"{k}={v}" for k, v in p.knobs.items()),
                "" if p.workspace_bytes is None else p.workspace_bytes,
                p.built,
                p.build_error,
                "" if p.build_seconds is None else f"{p.build_seconds:.6f}",
                f"{t.median_us:.3f}" if t else "",
                f"{t.p10_us:.3f}" if t else "",
                f"{t.p90_us:.3f}" if t else "",
                t.l2_flushed if t else "",
                f"{p.tflops:.2f}" if p.tflops else "",
                "" if p.max_abs_error is None else f"{p.max_abs_error:.6e}",
                "" if p.matches is None else p.matches,
                p.is_heuristic_pick,
                p.is_fastest,
                *env_values,
                SCHEMA_VERSION,
            )
        )
    return buf.getvalue()


def render(kind: str, result: RunResult, seed: int = 0) -> str:
    """The text of one export kind for a result (the script needs only its configuration)."""
    if kind == "script":
        return script(result.config, seed)
    if kind == "json":
        return result.to_json()
    if kind == "csv":
        return plans_csv(result)
    raise ValueError(f"unknown export {kind!r} (use {', '.join(EXPORT_KINDS)})")
