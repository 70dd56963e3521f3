"""Rich renderings of engine records for the terminal (the CLI's report).

Formatting helpers live here so the CLI and the dashboard describe a number the same way.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .engine.config import format_bytes
from .engine.environment import describe
from .engine.results import Accuracy, Environment, ErrorMetrics, RunResult, TimingStats

STATUS_STYLE = {
    "ok": "bold green",
    "cpu_only": "bold yellow",
    "mismatch": "bold red",
    "unsupported": "bold magenta",
    "invalid": "bold red",
    "error": "bold red",
}


def us(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1000:.3f} ms"
    return f"{value:.2f} µs"


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f} ms"


def sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def timing_text(t: TimingStats | None) -> str:
    if t is None:
        return "-"
    return f"{us(t.median_us)} (p10 {us(t.p10_us)}, p90 {us(t.p90_us)})"


def phases_table(result: RunResult) -> Table:
    table = Table(title="Build phases" + (" (cache hit: built earlier)" if result.cache_hit else ""), title_justify="left")
    table.add_column("phase")
    table.add_column("time", justify="right")
    table.add_column("what it does here")
    for p in result.phases:
        table.add_row(p.name, ms(p.seconds), p.error if not p.ok else p.note, style=None if p.ok else "red")
    if result.phases:
        table.add_row("total", ms(sum(p.seconds for p in result.phases)), "", style="bold")
    return table


def plans_table(result: RunResult) -> Table:
    table = Table(title="Plans (H: the heuristic's pick, *: fastest measured)", title_justify="left")
    for col, justify in (
        ("#", "right"), ("", "left"), ("plan", "left"), ("engine", "right"), ("knobs", "left"),
        ("workspace", "right"), ("build", "right"), ("kernel time", "right"), ("TFLOPS", "right"),
        ("max abs err", "right"), ("notes", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for p in result.plans:
        mark = ("H" if p.is_heuristic_pick else "") + ("*" if p.is_fastest else "")
        knobs = " ".join(f"{k}={v}" for k, v in p.knobs.items())
        err = sci(p.max_abs_error)
        if p.matches is False:
            err = f"[red]{err} FAIL[/red]"
        notes = ", ".join(p.behavior_notes) if p.built else f"[red]{p.build_error}[/red]"
        table.add_row(
            str(p.index), mark, p.name, "-" if p.engine_id is None else str(p.engine_id), knobs,
            "-" if p.workspace_bytes is None else format_bytes(p.workspace_bytes),
            ms(p.build_seconds), us(p.timing.median_us) if p.timing else "-",
            f"{p.tflops:.1f}" if p.tflops else "-", err, notes,
        )
    return table


def _metric_row(table: Table, who: str, m: ErrorMetrics | None, atol: float, rtol: float) -> None:
    if m is None:
        table.add_row(who, "-", "-", "-", "-", "not run")
        return
    verdict = "pass" if m.mismatched == 0 and m.nonfinite == 0 else f"FAIL ({m.mismatched} of {m.total})"
    table.add_row(who, sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs), str(m.nonfinite), verdict)


def accuracy_table(acc: Accuracy, dtype: str) -> Table:
    table = Table(
        title=f"Accuracy against {acc.reference} on {acc.device} (tolerance atol {acc.atol:g}, rtol {acc.rtol:g})",
        title_justify="left",
    )
    for col in ("output", "max abs", "max rel", "mean abs", "non-finite", "verdict"):
        table.add_column(col, justify="right" if col != "output" else "left")
    _metric_row(table, "cuDNN", acc.cudnn, acc.atol, acc.rtol)
    _metric_row(table, f"torch {dtype} SDPA", acc.torch_lowp, acc.atol, acc.rtol)
    if acc.note:
        table.caption = acc.note
    return table


def summary_text(result: RunResult) -> Text:
    c = result.config
    text = Text()
    text.append(f"{c.label()}  ", style="bold")
    text.append(result.status.upper().replace("_", " "), style=STATUS_STYLE.get(result.status, "bold"))
    text.append(f"  on {result.device or '-'}")
    text.append(f"\nFLOPs {result.flops / 1e9:.2f} G (kept scores only), I/O {format_bytes(result.io_bytes)}")
    if result.timing:
        t = result.timing
        text.append(f"\nkernel time {timing_text(t)} via {t.method}; L2 {'flushed' if t.l2_flushed else 'warm'}")
        if t.replay_us is not None:
            text.append(f"\nGPU time per call in a CUDA graph {us(t.replay_us)}")
        text.append(f"\nhost overhead per execute() {us(result.host_overhead_us)}")
        if result.tflops:
            text.append(f"\n{result.tflops:.1f} TFLOPS, {result.bandwidth_gbs:.0f} GB/s of minimum I/O")
        if result.autotune_verdict():
            text.append(f"\nautotune: {result.autotune_verdict()}")
    if result.message:
        text.append(f"\n{result.message}", style="red" if not result.ok else "yellow")
    return text


def result_renderable(result: RunResult) -> Group:
    parts: list = [summary_text(result)]
    if result.errors:
        parts.append(Text("\n".join(f"  {e['field']}: {e['message']}" for e in result.errors), style="red"))
    if result.phases:
        parts.append(phases_table(result))
    if result.plans:
        parts.append(plans_table(result))
    if result.accuracy:
        parts.append(accuracy_table(result.accuracy, result.config.dtype))
    return Group(*parts)


def environment_table(env: Environment) -> Table:
    table = Table(title="Environment", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for key, value in describe(env):
        table.add_row(key, value or "-", style="yellow" if key == "GPU unavailable" else None)
    return table
