"""The headline: status, kernel time, TFLOPS, accuracy verdict, at a glance."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...engine.results import RunResult
from ...report import STATUS_STYLE, us


class SummaryPane(Static):
    def show(self, result: RunResult) -> None:
        c = result.config
        t = Text()
        t.append(c.label(), style="bold")
        t.append("  ")
        t.append(result.status.upper().replace("_", " "), style=STATUS_STYLE.get(result.status, "bold"))
        if result.cache_hit:
            t.append("  (cached graph)", style="dim")
        t.append("\n")
        if result.timing:
            t.append(f"kernel {us(result.timing.median_us)}", style="bold cyan")
            if result.tflops:
                t.append(f"  {result.tflops:.1f} TFLOPS", style="bold")
            t.append(f"  p10–p90 {us(result.timing.p10_us)}–{us(result.timing.p90_us)}")
            t.append(f"\nhost overhead per execute() {us(result.host_overhead_us)}")
            t.append(f"  L2 {'flushed' if result.timing.l2_flushed else 'warm'}")
            if result.autotune_verdict():
                t.append(f"\nautotune: {result.autotune_verdict()}", style="dim")
        else:
            t.append(f"FLOPs {result.flops / 1e9:.2f} G", style="bold")
        acc = result.accuracy
        if acc is not None:
            m = acc.cudnn or acc.torch_lowp
            who = "cuDNN" if acc.cudnn else f"torch {c.dtype} (CPU)"
            if m is not None:
                ok = m.mismatched == 0 and m.nonfinite == 0
                t.append(f"\n{who} max abs err {m.max_abs:.2e} ", style=None)
                t.append("PASS" if ok else "FAIL", style="bold green" if ok else "bold red")
        if result.message:
            t.append(f"\n{result.message}", style="yellow" if result.ok else "red")
        self.update(t)
