"""Take a result away: a standalone reproduction script (repro.py), the RunResult as JSON, the
plans of every pass as CSV."""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path

from ..model.config import SdpaConfig
from ..model.results import ErrorMetrics, PeerResult, PlanResult, RunResult, Telemetry, TimingStats
from ..model.statuses import SCHEMA_VERSION
from .format import peer_errors, versions_words
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
# schema 2.1, appended so that older readers' columns keep their places: how each plan's figure
# was taken, and the GPU as it left the measurement (NVML; empty where it was not read)
TIMING_COLUMNS = ("regime", "stable", "retried", "samples")
GPU_COLUMNS = (
    "sm_clock_after_mhz",
    "power_after_w",
    "power_limit_w",
    "power_capped_pct",
    "thermal_capped_pct",
)
# schema 2.4, appended likewise: where the plan comes from (results.PLAN_SOURCES; blank for a peer)
SOURCE_COLUMNS = ("source",)
# appended likewise: the pass's status and message on each row, and a row a pass without plans
# (CPU only, refused) or one for a run with no pass (invalid, a known issue), so none is empty
STATUS_COLUMNS = ("status", "message")
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
    writer.writerow((*PLAN_COLUMNS, *ENV_COLUMNS, "schema_version", *TIMING_COLUMNS, *GPU_COLUMNS,
                     *SOURCE_COLUMNS, *STATUS_COLUMNS))  # fmt: skip
    env = result.environment
    env_values = [getattr(env, c, "") if env else "" for c in ENV_COLUMNS]
    for ps in result.passes:
        said = (ps.status, ps.message or result.message)  # a pass that did not run says why once, above
        for p in ps.plans:
            writer.writerow(_row(_plan_cells(result, ps.kind, p), p.timing, env_values, p.source, said))
        if not ps.plans:
            writer.writerow(_row(_config_cells(result, ps.kind), None, env_values, "", said))
    if not result.passes:
        writer.writerow(
            _row(_config_cells(result, ""), None, env_values, "", (result.status, result.message))
        )
    for ps in result.passes:  # a peer after the plans, its name where a plan's is, "peer" as engine
        errors = peer_errors(ps)
        for peer in ps.field_peers:
            cells = _peer_cells(result, ps.kind, peer, errors.get(peer.name))
            writer.writerow(
                _row(cells, peer.timing, env_values, "", (ps.status, ps.message or result.message))
            )
    return buf.getvalue()


def _row(
    cells: dict[str, object], t: TimingStats | None, env_values: list, source: str, said: tuple[str, str]
) -> tuple:
    """A plan's (or a peer's) row: its own columns, then what every row carries, in schema order."""
    return (*(cells.get(c, "") for c in PLAN_COLUMNS), *env_values, SCHEMA_VERSION,
            *timing_values(t), *gpu_values(t.telemetry if t else None), source, *said)  # fmt: skip


def _config_cells(result: RunResult, kind: str) -> dict[str, object]:
    """The columns every row of a pass starts with: the configuration, its dtype and layout, the pass."""
    return {"config": result.config.label(), "dtype": result.config.dtype, "layout": result.config.layout,
            "pass": kind}  # fmt: skip


def _kernel_cells(t: TimingStats | None) -> dict[str, object]:
    """A kernel time's columns: median, p10 and p90 in µs and whether L2 was flushed (blank: not timed)."""
    if not t:
        return {}
    return dict(kernel_median_us=f"{t.median_us:.3f}", kernel_p10_us=f"{t.p10_us:.3f}",
                kernel_p90_us=f"{t.p90_us:.3f}", l2_flushed=t.l2_flushed)  # fmt: skip


def _plan_cells(result: RunResult, kind: str, p: PlanResult) -> dict[str, object]:
    """A plan's own columns: what it is, how it built, its kernel time, TFLOPS and error, its marks."""
    return dict(_config_cells(result, kind), plan_index=p.index, plan_name=p.name,
                engine_id=_blank(p.engine_id), knobs=";".join(f"{k}={v}" for k, v in p.knobs.items()),
                workspace_bytes=_blank(p.workspace_bytes), built=p.built, build_error=p.build_error,
                build_seconds=_fixed(p.build_seconds, ".6f"), **_kernel_cells(p.timing),
                tflops=f"{p.tflops:.2f}" if p.tflops else "", max_abs_error=_fixed(p.max_abs_error, ".6e"),
                matches=_blank(p.matches), heuristic_pick=p.is_heuristic_pick,
                fastest=p.is_fastest)  # fmt: skip


def _peer_cells(result: RunResult, kind: str, peer: PeerResult, m: ErrorMetrics | None) -> dict[str, object]:
    """A peer's columns, as a plan's: "peer" as engine, why it did not run as its build error."""
    return dict(_config_cells(result, kind), plan_name=peer.name, engine_id="peer", built=peer.ran,
                build_error=peer.reason, **_kernel_cells(peer.timing),
                tflops=f"{peer.tflops:.2f}" if peer.tflops else "",
                max_abs_error=f"{m.max_abs:.6e}" if m else "", matches=m.passed if m else "",
                heuristic_pick=False, fastest=False)  # fmt: skip


def _blank(value: object) -> object:
    return "" if value is None else value


def _fixed(value: float | None, spec: str) -> str:
    """A figure written to `spec` (".6f"), blank where there is none."""
    return "" if value is None else format(value, spec)


def timing_values(t: TimingStats | None) -> tuple[object, ...]:
    """regime, stable, retried, samples of a plan's figure (blank where the plan was not timed, or
    in a file older than schema 2.1, which recorded none of them)."""
    if t is None or not t.regime:
        return ("",) * len(TIMING_COLUMNS)
    return t.regime, _blank(t.stable), t.retried, len(t.samples_us)


def gpu_values(tel: Telemetry | None) -> tuple[object, ...]:
    """The GPU's SM clock and power after the plan's measurement, the power limit, and the shares
    of it that ran power- and thermally-capped (blank where NVML was not read)."""
    if tel is None:
        return ("",) * len(GPU_COLUMNS)
    a = tel.after
    limit = a.power_limit_w if a.power_limit_w is not None else tel.before.power_limit_w
    return tuple(
        "" if v is None else f"{v:.1f}" if isinstance(v, float) else v
        for v in (a.sm_clock_mhz, a.power_w, limit, tel.power_capped_pct, tel.thermal_capped_pct)
    )


def crash_finding(result: RunResult) -> str:
    """What a crashed run's script reproduces, with the versions it was seen on ('' otherwise)."""
    crash = result.crash
    if crash is None:
        return ""
    return (
        f"this configuration crashed ({crash.error}) during {crash.during}, with "
        f"{versions_words(result.environment)}."
    )


def crash_folder() -> Path:
    """Where a crash's reproduction script is kept: beside the engine's log."""
    from platformdirs import user_log_dir

    return Path(user_log_dir("sdpa-explorer", appauthor=False)) / "crashes"


def save_crash_script(result: RunResult, seed: int = 0) -> Path:
    """Write the script that reproduces a crash where a report can pick it up; returns its path."""
    from ..store.files import atomic_write

    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = crash_folder()
    folder.mkdir(parents=True, exist_ok=True)  # the tool's own folder, beside its log: made unasked
    path = folder / f"crash-{stamp}-{default_filename(result.config, 'script')}"
    atomic_write(path, render("script", result, seed))
    return path


def path_problems(paths: dict[str, str | None]) -> list[str]:
    """What is wrong with the export paths given (kind -> path; None: not asked for), each naming
    its option: empty, something that is not a regular file there (a device, a FIFO, a folder), or
    a folder that is missing or not writable (none is made unasked)."""
    from ..store.files import write_problem

    problems = []
    for kind, path in paths.items():
        if path == "":
            problems.append(f"--save-{kind}: empty; give a file name")
        elif path is not None and (why := write_problem(path)):
            problems.append(f"--save-{kind}: cannot write {path}: {why}")
    return problems


def write_export(kind: str, path: str, result: RunResult, seed: int = 0) -> str:
    """Write one export in place of a regular file (a link's target); returns what to say."""
    from ..store.files import atomic_write

    written = atomic_write(path, render(kind, result, seed))
    return f"wrote {kind} to {path}" + (f" (the link's target {written})" if os.path.islink(path) else "")


def render(kind: str, result: RunResult, seed: int = 0) -> str:
    """The text of one export kind for a result (the script needs only its configuration)."""
    if kind == "script":
        return script(result.config, seed, crash_finding(result))
    if kind == "json":
        return result.to_json()
    if kind == "csv":
        return plans_csv(result)
    raise ValueError(f"unknown export {kind!r} (use {', '.join(EXPORT_KINDS)})")
