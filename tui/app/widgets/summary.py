"""The headline: status, then each pass's kernel time, TFLOPS and verdict, at a glance."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...engine.results import GOOD_STATUSES, PassResult, RunResult
from ...format import pass_short, status_style, status_word, us


def _verdict(t: Text, ok: bool) -> None:
    t.append("PASS" if ok else "FAIL", style="bold green" if ok else "bold red")


class SummaryPane(Static):
    def show(self, result: RunResult) -> None:
        t = Text()
        t.append(result.config.label(), style="bold")
        t.append("  ")
        t.append(status_word(result.status), style=status_style(result.status))
        if result.cache_hit:
            t.append("  (cached graph)", style="dim")
        timed = next((p.timing for p in result.passes if p.timing), None)
        if timed is not None:
            t.append(f"  L2 {'flushed' if timed.l2_flushed else 'warm'}", style="dim")
        for p in result.passes:
            self._pass(t, p, result.message)
        if result.step_us is not None:
            t.append(
                f"\nstep {'+'.join(pass_short(p.kind) for p in result.passes)} {us(result.step_us)}",
                style="bold",
            )
        if not result.passes:
            t.append(f"\nFLOPs {result.config.flops() / 1e9:.2f} G", style="bold")
        if result.message:
            t.append(f"\n{result.message}", style="yellow" if result.ok else "red")
        self.update(t)

    @staticmethod
    def _pass(t: Text, p: PassResult, run_message: str) -> None:
        """One pass: kernel time, TFLOPS and spread; its outputs' worst error; host overhead and autotune."""
        t.append(f"\n{p.kind} ", style="bold")
        if p.timing:
            t.append(f"kernel {us(p.timing.median_us)}", style="bold cyan")
            if p.tflops:
                t.append(f"  {p.tflops:.1f} TFLOPS", style="bold")
            t.append(f"  p10–p90 {us(p.timing.p10_us)}–{us(p.timing.p90_us)}")
        else:
            t.append(f"FLOPs {p.flops / 1e9:.2f} G", style="bold")
        line = Text()
        checks = [c for c in p.checks if c.cudnn is not None] or list(p.checks)
        metrics = [c.cudnn or next(iter(c.peers.values()), None) for c in checks]
        if checks and all(metrics):
            who = "cuDNN" if checks[0].cudnn else f"{next(iter(checks[0].peers))} ({p.check_device})"
            line.append(
                f"{who} {'/'.join(c.output for c in checks)} max abs err {max(m.max_abs for m in metrics):.2e} "
            )
            _verdict(line, all(m.passed for m in metrics))
        if p.repeatable is not None:
            bad = p.deterministic and not p.repeatable
            same = "yes" if p.repeatable else "no"
            line.append(f"  {'deterministic: ' if p.deterministic else ''}bitwise repeatable {same}",
                        style="bold red" if bad else ("green" if p.repeatable else "yellow"))  # fmt: skip
        if p.fp8 is not None:
            for name, ref in p.fp8.reference_amax.items():  # a wrong amax would scale the next step wrongly
                if name in p.fp8.amax:
                    line.append(f"  {name} {p.fp8.amax[name]:.4g} (reference {ref:.4g})")
        if line:
            t.append("\n  ")
            t.append_text(line)
        details = [f"host {us(p.host_overhead_us)}/execute()"] if p.timing else []
        details += [f"autotune: {p.autotune_verdict()}"] if p.autotune_verdict() else []
        if details:
            t.append(f"\n  {'; '.join(details)}", style="dim")
        if p.message and p.message not in run_message:
            t.append(f"\n  {p.message}", style="yellow" if p.status in GOOD_STATUSES else "red")
