"""Rich renderings of engine records for the terminal (the CLI's report).

Formatting helpers live here so the CLI and the dashboard describe a number the same way.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .engine.config import format_bytes
from .engine.environment import describe
from .engine.results import (
    Accuracy,
    BackwardResult,
    Environment,
    ErrorMetrics,
    Fp8Scaling,
    RunResult,
    TimingStats,
    autotune_verdict,
)

GRADIENTS = ("dQ", "dK", "dV")

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


def phases_table(
    record: RunResult | BackwardResult, title: str = "Build phases", cache_hit: bool | None = None
) -> Table:
    """The build phases of a forward (a RunResult) or of the backward (a BackwardResult)."""
    hit = getattr(record, "cache_hit", False) if cache_hit is None else cache_hit
    table = Table(title=title + (" (cache hit: built earlier)" if hit else ""), title_justify="left")
    table.add_column("phase")
    table.add_column("time", justify="right")
    table.add_column("what it does here")
    for p in record.phases:
        table.add_row(p.name, ms(p.seconds), p.error if not p.ok else p.note, style=None if p.ok else "red")
    if record.phases:
        table.add_row("total", ms(sum(p.seconds for p in record.phases)), "", style="bold")
    return table


def plans_table(record: RunResult | BackwardResult, title: str = "Plans", error_of: str = "") -> Table:
    """Every candidate plan of a forward (a RunResult) or of the backward (a BackwardResult);
    `error_of` says what the error column measures when it is not the output."""
    what = f"; max abs err: {error_of}" if error_of else ""
    table = Table(title=f"{title} (H: the heuristic's pick, *: fastest measured{what})", title_justify="left")
    for col, justify in (
        ("#", "right"),
        ("", "left"),
        ("plan", "left"),
        ("engine", "right"),
        ("knobs", "left"),
        ("workspace", "right"),
        ("build", "right"),
        ("kernel time", "right"),
        ("TFLOPS", "right"),
        ("max abs err", "right"),
        ("notes", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for p in record.plans:
        mark = ("H" if p.is_heuristic_pick else "") + ("*" if p.is_fastest else "")
        knobs = " ".join(f"{k}={v}" for k, v in p.knobs.items())
        err = sci(p.max_abs_error)
        if p.matches is False:
            err = f"[red]{err} FAIL[/red]"
        notes = ", ".join(p.behavior_notes) if p.built else f"[red]{p.build_error}[/red]"
        table.add_row(
            str(p.index),
            mark,
            p.name,
            "-" if p.engine_id is None else str(p.engine_id),
            knobs,
            "-" if p.workspace_bytes is None else format_bytes(p.workspace_bytes),
            ms(p.build_seconds),
            us(p.timing.median_us) if p.timing else "-",
            f"{p.tflops:.1f}" if p.tflops else "-",
            err,
            notes,
        )
    return table


def _metric_cells(m: ErrorMetrics | None) -> list[str]:
    """max abs, max rel, mean abs, non-finite, verdict of one output against its reference."""
    if m is None:
        return ["-", "-", "-", "-", "not run"]
    verdict = (
        "pass" if m.mismatched == 0 and m.nonfinite == 0 else f"[red]FAIL ({m.mismatched} of {m.total})[/red]"
    )
    return [sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs), str(m.nonfinite), verdict]


def accuracy_table(acc: Accuracy, dtype: str) -> Table:
    table = Table(
        title=f"Accuracy against {acc.reference} on {acc.device} (tolerance atol {acc.atol:g}, rtol {acc.rtol:g})",
        title_justify="left",
    )
    for col in ("output", "max abs", "max rel", "mean abs", "non-finite", "verdict"):
        table.add_column(col, justify="right" if col != "output" else "left")
    table.add_row("cuDNN", *_metric_cells(acc.cudnn))
    table.add_row(f"torch {dtype} SDPA", *_metric_cells(acc.torch_lowp))
    if acc.note:
        table.caption = acc.note
    return table


def gradients_table(b: BackwardResult, device: str, dtype: str) -> Table:
    """dQ, dK, dV against fp32 autograd: cuDNN's and torch's own backward, each with its atol."""
    reference = b.reference or "fp32 autograd"
    table = Table(
        title=f"Gradients against {reference} on {device or '-'} (atol: a share of each gradient's max |reference|, "
        f"rtol {b.rtol:g})",
        title_justify="left",
    )
    for col in ("gradient", "by", "atol", "max abs", "max rel", "mean abs", "non-finite", "verdict"):
        table.add_column(col, justify="left" if col in ("gradient", "by") else "right")
    for name in GRADIENTS:
        atol = sci(b.atol.get(name))
        table.add_row(name, "cuDNN", atol, *_metric_cells(b.gradients.get(name)))
        table.add_row(
            "",
            f"torch {dtype}",
            atol,
            *_metric_cells(b.torch_gradients.get(name)),
            end_section=name != GRADIENTS[-1],
        )
    caption = [f"torch: {b.torch_backend}"] if b.torch_backend else []
    if b.note:
        caption.append(b.note)
    if caption:
        table.caption = "; ".join(caption)
    return table


def fp8_text(fp8: Fp8Scaling, what: str) -> str:
    """The scales an FP8 graph read and the amax it wrote, each amax beside the reference's maximum."""
    scales = ", ".join(f"{k} {v:.4g}" for k, v in fp8.scales.items())
    amax = ", ".join(
        f"{k} {v:.4g}" + (f" (reference max {fp8.reference_amax[k]:.4g})" if k in fp8.reference_amax else "")
        for k, v in fp8.amax.items()
    )
    return f"\n{what} FP8 scales: {scales or '-'}\n{what} FP8 amax: {amax or '-'}"


def backward_text(result: RunResult) -> Text:
    """The backward's lines of the summary: status, kernel time, TFLOPS, step time, verdict, determinism."""
    b = result.backward
    text = Text()
    if b is None:
        return text
    text.append("\nbackward ", style="bold")
    text.append(b.status.upper().replace("_", " "), style=STATUS_STYLE.get(b.status, "bold"))
    if b.passed is not None:
        text.append(
            "  gradients " + ("pass" if b.passed else "FAIL"), style="green" if b.passed else "bold red"
        )
    text.append(
        f"\nbackward FLOPs {b.flops / 1e9:.2f} G (2.5x the forward's), I/O {format_bytes(b.io_bytes)}"
    )
    if b.timing:
        t = b.timing
        text.append(
            f"\nbackward kernel time {timing_text(t)} via {t.method}; L2 {'flushed' if t.l2_flushed else 'warm'}"
        )
        text.append(f"\nbackward host overhead per execute() {us(b.host_overhead_us)}")
        if b.tflops:
            bandwidth = f", {b.bandwidth_gbs:.0f} GB/s of minimum I/O" if b.bandwidth_gbs else ""
            text.append(f"\nbackward {b.tflops:.1f} TFLOPS (at 2.5x the forward's FLOPs){bandwidth}")
    if result.step_us is not None:
        text.append(f"\ntraining step (forward + backward kernel time) {us(result.step_us)}")
    verdict = autotune_verdict(b.plans, b.heuristic_plan, b.fastest_plan)
    if verdict:
        text.append(f"\nbackward autotune: {verdict}")
    repeat = {
        True: "bitwise repeatable (two executions, identical dQ, dK, dV)",
        False: "not bitwise repeatable (two executions differed)",
        None: "repeatability not checked",
    }
    text.append(
        "\n"
        + (
            "deterministic algorithm asked for"
            if b.deterministic
            else "deterministic algorithm not asked for"
        )
        + "; "
        + repeat[b.bitwise_repeatable],
        style="red" if b.deterministic and b.bitwise_repeatable is False else None,
    )
    if b.fp8 is not None:
        text.append(fp8_text(b.fp8, "backward"))
    if b.message and b.message not in result.message:
        text.append(
            f"\nbackward: {b.message}", style="red" if b.status not in ("ok", "cpu_only") else "yellow"
        )
    return text


def summary_text(result: RunResult) -> Text:
    c = result.config
    text = Text()
    text.append(f"{c.label()}  ", style="bold")
    text.append(result.status.upper().replace("_", " "), style=STATUS_STYLE.get(result.status, "bold"))
    text.append(f"  on {result.device or '-'}")
    text.append(f"\nFLOPs {result.flops / 1e9:.2f} G (kept scores only), I/O {format_bytes(result.io_bytes)}")
    if result.timing:
        t = result.timing
        text.append(
            f"\nkernel time {timing_text(t)} via {t.method}; L2 {'flushed' if t.l2_flushed else 'warm'}"
        )
        if t.replay_us is not None:
            text.append(f"\nGPU time per call in a CUDA graph {us(t.replay_us)}")
        text.append(f"\nhost overhead per execute() {us(result.host_overhead_us)}")
        if result.tflops:
            text.append(f"\n{result.tflops:.1f} TFLOPS, {result.bandwidth_gbs:.0f} GB/s of minimum I/O")
        if result.autotune_verdict():
            text.append(f"\nautotune: {result.autotune_verdict()}")
    if result.fp8 is not None:
        text.append(fp8_text(result.fp8, "forward"))
        text.append(f"\nFP8 recipe: {result.fp8.recipe}", style="dim")
    text.append_text(backward_text(result))
    if result.message:
        text.append(f"\n{result.message}", style="red" if not result.ok else "yellow")
    return text


def result_renderable(result: RunResult) -> Group:
    """The CLI's report: the summary, then the forward's phases, plans and accuracy, then the
    backward's (when the configuration has one)."""
    lowp = "fp16" if result.config.fp8 else result.config.dtype  # torch has no FP8 attention
    parts: list = [summary_text(result)]
    if result.errors:
        parts.append(Text("\n".join(f"  {e['field']}: {e['message']}" for e in result.errors), style="red"))
    if result.phases:
        parts.append(phases_table(result))
    if result.plans:
        parts.append(plans_table(result))
    if result.accuracy:
        parts.append(accuracy_table(result.accuracy, lowp))
    b = result.backward
    if b is not None:
        if b.phases:
            parts.append(phases_table(b, "Backward build phases", cache_hit=result.cache_hit))
        if b.plans:
            parts.append(plans_table(b, "Backward plans", error_of="the largest of dQ, dK, dV"))
        if b.gradients or b.torch_gradients:
            parts.append(gradients_table(b, result.device, lowp))
        elif b.note:
            parts.append(Text(b.note, style="yellow"))
    return Group(*parts)


def environment_table(env: Environment) -> Table:
    table = Table(title="Environment", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for key, value in describe(env):
        table.add_row(key, value or "-", style="yellow" if key == "GPU unavailable" else None)
    return table
