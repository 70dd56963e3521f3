"""How the CLI and the dashboard say a number or a verdict: units, durations, status words and
styles, and the words for a pass. One module, so the report and the panes can never disagree."""

from __future__ import annotations

from .engine.config import format_bytes
from .engine.results import (
    STATUS_CPU_ONLY,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_MISMATCH,
    STATUS_OK,
    STATUS_UNSUPPORTED,
    ErrorMetrics,
    PassResult,
    TimingStats,
)

__all__ = [
    "format_bytes",
    "ms",
    "pass_title",
    "repeat_words",
    "sci",
    "status_style",
    "status_word",
    "timing_text",
    "us",
    "verdict_words",
]

STATUS_STYLE = {
    STATUS_OK: "bold green",
    STATUS_CPU_ONLY: "bold yellow",
    STATUS_MISMATCH: "bold red",
    STATUS_UNSUPPORTED: "bold magenta",
    STATUS_INVALID: "bold red",
    STATUS_ERROR: "bold red",
}


def status_word(status: str) -> str:
    """'ok' -> 'OK', 'cpu_only' -> 'CPU ONLY': how a status reads in a headline."""
    return status.upper().replace("_", " ")


def status_style(status: str) -> str:
    return STATUS_STYLE.get(status, "bold")


def us(value: float | None) -> str:
    """A kernel time: µs below a millisecond, ms above."""
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1000:.3f} ms"
    return f"{value:.2f} µs"


def ms(seconds: float | None) -> str:
    """A build phase's duration, from seconds."""
    return "-" if seconds is None else f"{seconds * 1000:.2f} ms"


def sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def timing_text(t: TimingStats | None) -> str:
    if t is None:
        return "-"
    return f"{us(t.median_us)} (p10 {us(t.p10_us)}, p90 {us(t.p90_us)})"


_SHORT = {"forward": "fwd", "backward": "bwd"}


def pass_short(kind: str) -> str:
    """'backward' -> 'bwd': a pass's name where room is short (chart labels)."""
    return _SHORT.get(kind, kind[:3])


def pass_title(kind: str) -> str:
    """'forward' -> 'Forward': a pass's name at the head of a table."""
    return kind[:1].upper() + kind[1:]


def verdict_words(m: ErrorMetrics | None) -> str:
    """pass, FAIL (n of total), or 'not run' for an output nobody computed."""
    if m is None:
        return "not run"
    return "pass" if m.passed else f"FAIL ({m.mismatched} of {m.total})"


def repeat_words(p: PassResult) -> str:
    """Whether the deterministic algorithm was asked for and whether two executions agreed bitwise."""
    asked = (
        "deterministic algorithm asked for" if p.deterministic else "deterministic algorithm not asked for"
    )
    seen = {
        True: "bitwise repeatable (two executions, identical outputs)",
        False: "not bitwise repeatable (two executions differed)",
        None: "repeatability not checked",
    }[p.repeatable]
    return f"{asked}; {seen}"
