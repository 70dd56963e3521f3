"""The headline: status, then each pass's kernel time (in its regime), TFLOPS and verdict, at a glance."""

from __future__ import annotations

from rich.text import Text

from ...model.results import ErrorMetrics, PassResult, RunResult
from ...present.fastest import fastest_lines
from ...present.format import (
    finding_rows,
    pass_note,
    peer_standing,
    regime_note,
    regime_style,
    run_note,
    status_style,
    status_word,
    step_regime,
    step_words,
    us,
)
from .fitted import FittedStatic


def speed_line(p: PassResult) -> Text:
    """Kernel time and its regime (with 'unstable' and the capping when they matter), TFLOPS and
    the p10–p90 spread; the FLOPs where the pass was not timed."""
    t = Text(f"{p.kind} ", style="bold")
    if p.timing is None:
        t.append(f"FLOPs {p.flops / 1e9:.2f} G", style="bold")
        return t
    t.append(f"kernel {us(p.timing.median_us)}", style="bold cyan")
    t.append(regime_note(p.timing), style=regime_style(p.timing))  # burst or sustained; unstable; capped
    if p.tflops:
        t.append(f"  {p.tflops:.1f} TFLOPS", style="bold")
    t.append(f"  p10–p90 {us(p.timing.p10_us)}–{us(p.timing.p90_us)}")
    return t


def worst_error(p: PassResult) -> tuple[str, list[ErrorMetrics]]:
    """Who computed the outputs that were checked (cuDNN, or on a CPU the peer) and their metrics."""
    checks = [c for c in p.checks if c.cudnn is not None]
    if checks:
        return "cuDNN", [c.cudnn for c in checks]
    peers = [next(iter(c.peers.items()), None) for c in p.checks]
    if not peers or None in peers:
        return "", []
    where = "CPU" if p.check_device == "cpu" else "GPU"  # the GPU's: cuDNN declined the pass
    return f"{peers[0][0]} on the {where}, not cuDNN:", [m for _, m in peers]


def verdict_line(p: PassResult) -> Text:
    """The outputs' worst error and verdict, bitwise repeatability, and FP8 amax beside the reference."""
    line = Text()
    who, metrics = worst_error(p)
    if metrics:
        line.append(
            f"{who} {'/'.join(c.output for c in p.checks)} max abs err {max(m.max_abs for m in metrics):.2e} "
        )
        ok = all(m.passed for m in metrics)
        if who == "cuDNN":
            line.append("PASS" if ok else "FAIL", style="bold green" if ok else "bold red")
        else:  # a peer's verdict on the CPU: not to be read as cuDNN's
            line.append("pass" if ok else "fail", style="green" if ok else "red")
    if p.repeatable is not None:
        style = (
            "bold red" if p.deterministic and not p.repeatable else ("green" if p.repeatable else "yellow")
        )
        asked = "deterministic: " if p.deterministic else ""
        line.append(f"  {asked}bitwise repeatable {'yes' if p.repeatable else 'no'}", style=style)
    if p.fp8 is not None:
        for name, ref in p.fp8.reference_amax.items():  # a wrong amax would scale the next step wrongly
            if name in p.fp8.amax:
                line.append(f"  {name} {p.fp8.amax[name]:.4g} (reference {ref:.4g})")
    return line


def details_line(p: PassResult) -> str:
    details = [f"host {us(p.host_overhead_us)}/execute()"] if p.timing else []
    if p.autotune_verdict():
        details.append(f"autotune: {p.autotune_verdict()}")
    return "; ".join(details)


class SummaryPane(FittedStatic):
    """The headline. While the panes are stale it says so first, and every verdict under it is
    grey: a green PASS must never stand for a configuration the form no longer shows."""

    _result: RunResult | None = None
    _stale = False

    def set_stale(self, stale: bool) -> None:
        if stale != self._stale:
            self._stale = stale
            if self._result is not None:
                self.show(self._result)

    def show(self, result: RunResult) -> None:
        self._result = result
        t = self._headline(result)
        if self._stale:
            badge = Text(" STALE ", style="bold black on yellow")
            t = Text.assemble(badge, " not the form's configuration\n", Text(t.plain, style="dim"))
        self.update(t)

    def _headline(self, result: RunResult) -> Text:
        """The run's lead and findings, each pass's lines, then the step and the run's own words."""
        t = lead_text(result)
        for p in result.passes:
            t.append_text(pass_lines(p, result.message))
        step = step_words(result, short=True)
        if step:
            t.append(f"\n{step}", style="bold")
            t.append(*step_regime(result.passes))
        if not result.passes:
            t.append(f"\nFLOPs {result.config.flops() / 1e9:.2f} G", style="bold")
        words, style = run_note(result)
        if words:
            t.append(f"\n{words}", style=style)
        return t


def lead_text(result: RunResult) -> Text:
    """Status first (never split at 80 columns), the configuration, the graph cache and L2; then
    a crash and the known issues, which lead: they are findings."""
    t = Text()
    t.append(status_word(result.status), style=status_style(result.status))
    t.append("  ")
    t.append(result.config.label(), style="bold")
    if result.cache_hit:
        t.append("  (cached graph)", style="dim")
    timed = next((p.timing for p in result.passes if p.timing), None)
    if timed is not None:
        t.append(f"  L2 {timed.l2_state}", style="dim")
    for name, words in finding_rows(result):
        t.append(f"\n{name}: ", style="bold red" if result.crash else "bold yellow")
        t.append(words)
    if result.crash is not None:
        t.append("\nCtrl+E exports the standalone script that reproduces it", style="bold")
    return t


def pass_lines(p: PassResult, run_message: str) -> Text:
    """A pass's lines of the headline: speed, verdict, standing among the peers, details, its words."""
    t = Text("\n")
    t.append_text(speed_line(p))
    verdict = verdict_line(p)
    if verdict:
        t.append("\n  ")
        t.append_text(verdict)
    if peer_standing(p):  # their kernel time over cuDNN's pick's: the Peers pane has the rest
        t.append(f"\n  against peers: {peer_standing(p)}", style="bold")
    for words, style in fastest_lines(p):  # the fastest way: cuDNN's plans, its forms, the peers
        t.append(f"\n  {words}", style=style)
    if details_line(p):
        t.append(f"\n  {details_line(p)}", style="dim")
    words, style = pass_note(p, run_message)
    if words:
        t.append(f"\n  {words}", style=style)
    return t
