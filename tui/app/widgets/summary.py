"""The headline: status, kernel time, TFLOPS, accuracy verdict, at a glance."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...engine.results import BackwardResult, ErrorMetrics, Fp8Scaling, RunResult
from ...report import STATUS_STYLE, us
from .accuracy import torch_dtype


def _verdict(t: Text, ok: bool) -> None:
    t.append("PASS" if ok else "FAIL", style="bold green" if ok else "bold red")


def _fine(metrics: dict[str, ErrorMetrics]) -> bool:
    return all(m.mismatched == 0 and m.nonfinite == 0 for m in metrics.values())


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
            who = "cuDNN" if acc.cudnn else f"torch {torch_dtype(c)} (CPU)"
            if m is not None:
                t.append(f"\n{who} max abs err {m.max_abs:.2e} ", style=None)
                _verdict(t, m.mismatched == 0 and m.nonfinite == 0)
        if result.fp8 is not None:
            self._amax(t, result.fp8, "amax_o")
        if result.backward is not None:
            self._backward(t, result, result.backward)
        if result.message:
            t.append(f"\n{result.message}", style="yellow" if result.ok else "red")
        self.update(t)

    @staticmethod
    def _amax(t: Text, fp8: Fp8Scaling, name: str) -> None:
        """The amax the kernel wrote beside the reference's: a wrong amax would scale the next step wrongly."""
        if name in fp8.amax:
            ref = fp8.reference_amax.get(name)
            t.append(f"  {name} {fp8.amax[name]:.4g}" + ("" if ref is None else f" (reference {ref:.4g})"))

    @staticmethod
    def _backward(t: Text, result: RunResult, b: BackwardResult) -> None:
        """The training step: backward kernel time, fwd+bwd, and whether dQ, dK, dV are right."""
        t.append("\n")
        if b.timing:
            t.append(f"backward {us(b.timing.median_us)}", style="bold cyan")
            if b.tflops:
                t.append(f"  {b.tflops:.1f} TFLOPS", style="bold")
            if result.step_us is not None:
                t.append(f"  step fwd+bwd {us(result.step_us)}", style="bold")
        else:
            t.append(f"backward FLOPs {b.flops / 1e9:.2f} G", style="bold")
        grads = b.gradients or b.torch_gradients
        if grads:
            who = "" if b.gradients else f"torch {torch_dtype(result.config)} (CPU) "
            t.append(f"\n{who}dQ/dK/dV max abs err {max(m.max_abs for m in grads.values()):.2e} ")
            _verdict(t, bool(b.passed) if b.gradients else _fine(grads))
        if b.bitwise_repeatable is not None:
            same = "yes" if b.bitwise_repeatable else "no"
            bad = b.deterministic and not b.bitwise_repeatable
            t.append(
                f"  {'deterministic: ' if b.deterministic else ''}bitwise repeatable {same}",
                style="bold red" if bad else ("green" if b.bitwise_repeatable else "yellow"),
            )
        if b.message and b.message not in result.message:
            t.append(f"\nbackward: {b.message}", style="yellow" if b.status in ("ok", "cpu_only") else "red")
