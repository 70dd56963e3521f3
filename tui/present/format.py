"""How the CLI and the dashboard say a number or a verdict: units, durations, status words and
styles, and the words for a pass. One module, so the report and the panes can never disagree."""

from __future__ import annotations

from typing import Any

from ..model.config import format_bytes
from ..model.results import (
    Environment,
    ErrorMetrics,
    GpuState,
    PassResult,
    PeerResult,
    PlanResult,
    RunResult,
    Telemetry,
    TimingStats,
    l2_words,
)
from ..model.statuses import (
    GOOD_STATUSES,
    STATUS_CPU_ONLY,
    STATUS_CRASH,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_KNOWN_ISSUE,
    STATUS_MISMATCH,
    STATUS_OK,
    STATUS_UNSUPPORTED,
)

__all__ = [
    "PEER_COLUMNS",
    "plan_mark",
    "plan_marks",
    "finding_rows",
    "format_bytes",
    "gpu_rows",
    "l2_words",
    "ms",
    "multiple",
    "no_telemetry_words",
    "no_timing_words",
    "pass_note",
    "pass_title",
    "peer_error_label",
    "peer_errors",
    "peer_speedup",
    "peer_standing",
    "peers_unrun",
    "regime_note",
    "regime_style",
    "repeat_words",
    "run_note",
    "sample_rows",
    "sci",
    "seconds",
    "speed_multiple",
    "step_regime",
    "step_words",
    "status_style",
    "status_word",
    "timing_text",
    "us",
    "verdict_words",
    "versions_words",
]

STATUS_STYLE = {
    STATUS_OK: "bold green",
    STATUS_CPU_ONLY: "bold yellow",
    STATUS_MISMATCH: "bold red",
    STATUS_UNSUPPORTED: "bold magenta",
    STATUS_INVALID: "bold red",
    STATUS_ERROR: "bold red",
    STATUS_CRASH: "bold white on red",
    STATUS_KNOWN_ISSUE: "bold yellow",
}
_STATUS_WORDS = {STATUS_CRASH: "CRASHED"}


def status_word(status: str) -> str:
    """'ok' -> 'OK', 'cpu_only' -> 'CPU ONLY': how a status reads in a headline."""
    return _STATUS_WORDS.get(status) or status.upper().replace("_", " ")


def no_timing_words(result: RunResult) -> str:
    """Why a result has no kernel time: no GPU here, or the run ended before timing (and how)."""
    if result.status == STATUS_CPU_ONLY:
        reason = result.environment.unavailable_reason if result.environment else "no usable GPU"
        return f"no kernel times: there is no usable GPU here ({reason}); timing and plans need one"
    if result.status == STATUS_OK:
        return "no kernel time in this result"
    return f"no kernel time: the run ended {result.status.replace('_', ' ')} before timing"


def versions_words(env: Environment | None) -> str:
    """What an upstream report needs to name: cuDNN, the frontend, the driver, torch and the GPU."""
    if env is None:
        return "not recorded"
    gpu = f"{env.gpu_name} (cc {env.compute_capability})" if env.gpu_name else "no GPU"
    return (
        f"cuDNN {env.cudnn_backend_version or '?'} (frontend {env.frontend_version or '?'}), "
        f"driver {env.driver_version or '?'}, torch {env.torch_version or '?'}, {gpu}"
    )


def finding_rows(result: RunResult, long: bool = False) -> list[tuple[str, str]]:
    """A crash and the known issues a result matches, a (name, words) row each; `long` adds how
    each known issue was established."""
    rows: list[tuple[str, str]] = []
    crash = result.crash
    if crash is not None:
        what = "the CUDA context was lost" if crash.context_lost else "the engine process died"
        rows += [("crashed", what), ("error", crash.error), ("during", crash.during)]
        if crash.plan:
            rows.append(("plan", f"{crash.plan} ({crash.kind})" if crash.kind else crash.plan))
        rows.append(("versions", versions_words(result.environment)))
    for issue in result.known_issues:
        rows.append(("known issue", f"{issue.summary} [{issue.key}; {issue.outcome}]"))
        if long:
            rows.append(("established", issue.established))
    return rows


def status_style(status: str) -> str:
    return STATUS_STYLE.get(status, "bold")


def us(value: float | None) -> str:
    """A kernel time: µs below a millisecond, ms above."""
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1000:.3f} ms"
    return f"{value:.2f} µs"


def span_us(values: tuple[float, ...]) -> str:
    """The least and the most of a few kernel times."""
    return f"{us(min(values))}-{us(max(values))}" if values else "-"


def placement_words(r: Any) -> str:
    """A search's gain where it moved with the inputs' place in memory (SearchResult.gain_range)."""
    span = r.gain_range()
    if span is None:
        return ""
    best, pick = r.best, r.pick
    return (
        f"inputs at {len(best.placements_us)} places in memory: best {span_us(best.placements_us)}, "
        f"pick {span_us(pick.placements_us)}; gain {span[0]:+.1f}% to {span[1]:+.1f}% (median of places shown)"
    )


FRESH_PROCESS = "in a fresh engine process"


def fresh_words(r: Any) -> str:
    """What the contender read, pinned, beside the pick in a fresh engine process (SearchResult.fresh),
    after FRESH_PROCESS: the CLI's line says those words, the Search pane's row label does."""
    f = getattr(r, "fresh", None)
    if f is None:
        return ""
    if f.message or f.gain_pct is None:
        return f"not measured ({f.message or 'no figure'})"
    return f"as a pinned run reads it: {f.plan} {us(f.best_us)}, pick {us(f.pick_us)}: {f.gain_pct:+.1f}%"


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


# ---- a figure's regime and the GPU's state around it (DESIGN.md fact 11) ------------------------------


def regime_note(t: TimingStats | None) -> str:
    """' (burst)', ' (sustained, unstable (p90/p10 1.085), power-capped 38%)': what follows a kernel
    time; '' for a figure from a file older than schema 2.1, which never said."""
    words = t.regime_words if t is not None else ""
    return f" ({words})" if words else ""


def regime_style(t: TimingStats | None) -> str:
    """Yellow for a figure that is unstable or was capped (it would not repeat), else dim."""
    if t is None:
        return "dim"
    capped = t.telemetry is not None and t.telemetry.capped_words
    return "bold yellow" if t.stable is False or capped else "dim"


def step_regime(passes: tuple[PassResult, ...]) -> tuple[str, str]:
    """What follows a step time (the passes' kernel times added up): their regimes, and
    'unstable' when one of them is, e.g. ' (sustained, unstable)'; and its style."""
    timings = [p.timing for p in passes if p.timing is not None]
    words = list(dict.fromkeys(t.regime for t in timings if t.regime))
    unstable = any(t.stable is False for t in timings)
    if unstable:
        words.append("unstable")
    return (f" ({', '.join(words)})" if words else ""), ("bold yellow" if unstable else "dim")


def step_words(result: RunResult, short: bool = False) -> str:
    """A training step's kernel time, before step_regime's words: the report names each pass,
    the headline (`short`) abbreviates them; '' for a single pass or an untimed one."""
    if result.step_us is None:
        return ""
    if short:
        return f"step {'+'.join(pass_short(p.kind) for p in result.passes)} {us(result.step_us)}"
    return f"step ({' + '.join(p.kind for p in result.passes)} kernel time) {us(result.step_us)}"


def pass_note(p: PassResult, run_message: str) -> tuple[str, str]:
    """A pass's own words where the run's do not already say them, and their style (yellow for
    a pass that went well, red else); ('', '') where there are none."""
    if not p.message or p.message in run_message:
        return "", ""
    return p.message, "yellow" if p.status in GOOD_STATUSES else "red"


def run_note(result: RunResult) -> tuple[str, str]:
    """The run's own words and their style (yellow for a run that went well, red else); ('', '')
    where there are none or the run crashed: a crash's words are in its findings."""
    if not result.message or result.crash is not None:
        return "", ""
    return result.message, "yellow" if result.ok else "red"


def sample_rows(t: TimingStats) -> list[tuple[str, str]]:
    """How many samples the figure has and whether they held still: ('samples', '20, retried'),
    ('p90/p10', '1.085, UNSTABLE')."""
    n = len(t.samples_us) or t.replays
    verdict = {True: "stable", False: "UNSTABLE", None: "too few to judge"}[t.stable]
    if not t.regime and t.stable is None:
        verdict = ""  # a file older than schema 2.1: nobody judged
    ratio = [f"{t.p90_us / t.p10_us:.3f}"] if t.p10_us else []
    return [
        ("samples", f"{n}" + (", retried" if t.retried else "")),
        ("p90/p10", ", ".join([*ratio, verdict] if verdict else ratio) or "-"),
    ]


def _change(before: float | None, after: float | None, unit: str, digits: int = 0) -> str:
    """'1980 → 1755 MHz'; a side NVML could not read is '?'."""

    def one(v: float | None) -> str:
        return "?" if v is None else f"{v:.{digits}f}"

    return f"{one(before)} → {one(after)} {unit}"


def _reasons(state: GpuState) -> str:
    return ", ".join(state.reasons) if state.reasons else "none"


def gpu_rows(tel: Telemetry) -> list[tuple[str, str]]:
    """The GPU around one measurement, a (name, value) row each: clocks, power against the limit,
    temperature, active reasons, the capped shares, and the rest wait of a burst."""
    b, a = tel.before, tel.after
    limit = a.power_limit_w if a.power_limit_w is not None else b.power_limit_w
    power = _change(b.power_w, a.power_w, "W") + (f" of {limit:.0f} W" if limit is not None else "")
    shares = [
        f"{what} {'?' if pct is None else f'{pct:.0f}%'}"
        for what, pct in (("power", tel.power_capped_pct), ("thermal", tel.thermal_capped_pct))
    ]
    rows = [
        ("SM clock", _change(b.sm_clock_mhz, a.sm_clock_mhz, "MHz")),
        ("mem clock", _change(b.mem_clock_mhz, a.mem_clock_mhz, "MHz")),
        ("power", power),
        ("temperature", _change(b.temperature_c, a.temperature_c, "°C")),
        ("reasons", f"{_reasons(b)} → {_reasons(a)}"),
        ("capped", ", ".join(shares)),
        ("timed for", f"{tel.seconds:.2f} s"),
    ]
    if tel.rested is not None or tel.rest_wait_s:
        rested = {True: "rested", False: "NOT rested", None: ""}[tel.rested]
        rows.append(("rest wait", f"{tel.rest_wait_s:.2f} s" + (f", {rested}" if rested else "")))
    return rows


def no_telemetry_words(env: Environment | None) -> str:
    """Why a figure has no GPU telemetry: the environment's reason (NVML unavailable, ...)."""
    reason = env.telemetry if env is not None else ""
    if not reason or reason.startswith("NVML, "):  # NVML was there: this figure did not record it
        reason = "not recorded in this result"
    return f"no telemetry: {reason}"


# the columns of a table of peers, the report's and the Peers pane's
PEER_COLUMNS = (
    "peer",
    "kernel",
    "TFLOPS",
    "cuDNN speed",
    "max abs O",
    "verdict",
    "compile",
    "what / why not",
)


def speed_multiple(p: PassResult, timing: TimingStats | None) -> float | None:
    """cuDNN's heuristic pick's speed as a multiple of another's: the other's kernel time over the
    pick's (above 1: cuDNN's pick is faster); None where either was not timed."""
    if p.timing is None or timing is None or not p.timing.median_us:
        return None
    return timing.median_us / p.timing.median_us


def peer_speedup(p: PassResult, peer: PeerResult) -> float | None:
    """How many times faster cuDNN's heuristic pick is than the peer (above 1: cuDNN is faster)."""
    return speed_multiple(p, peer.timing)


def multiple(x: float | None) -> str:
    """A speed multiple as the tables and the headline write it: '1.93x'; '-' when not timed."""
    return "-" if x is None else f"{x:.2f}x"


def seconds(value: float | None) -> str:
    """A compile time, from seconds: '3.0 s'."""
    return "-" if value is None else f"{value:.1f} s"


def peer_errors(p: PassResult) -> dict[str, ErrorMetrics]:
    """Each peer's error by its name: of O for a forward; of a backward's dQ, dK and dV the worst
    (an output outside its tolerance first, else the largest max abs)."""
    worst: dict[str, ErrorMetrics] = {}
    for c in p.checks:
        for name, m in c.peers.items():
            if name not in worst or (not m.passed, m.max_abs) > (not worst[name].passed, worst[name].max_abs):
                worst[name] = m
    return worst


def peer_error_label(p: PassResult) -> str:
    """The error column's title for a pass's peers: "max abs O", or "max abs dQ/dK/dV"."""
    return "max abs " + "/".join(c.output for c in p.checks) if p.checks else "max abs O"


def peers_unrun(p: PassResult) -> str:
    """One line when every peer asked for did not run for one reason (no GPU, dropout):
    'Forward peers torch FLASH fp16, Flex fp16: not run: ...'; '' otherwise."""
    reasons = {peer.reason for peer in p.field_peers}
    if len(reasons) != 1 or "" in reasons:
        return ""
    return f"{pass_title(p.kind)} peers {', '.join(peer.name for peer in p.field_peers)}: {reasons.pop()}"


def peer_standing(p: PassResult) -> str:
    """Where cuDNN stands among the peers that were timed, for the headline: cuDNN's speed as a
    multiple of each peer's ("cuDNN 1.94x FLASH, 1.57x Flex"); '' when none was timed."""
    parts = [
        f"{multiple(x)} {peer.short}" for peer in p.field_peers if (x := peer_speedup(p, peer)) is not None
    ]
    return f"cuDNN {', '.join(parts)}" if parts else ""


def plan_marks(plans: tuple[PlanResult, ...]) -> str:
    """What a plan table's marks mean; the pinned plan's only where one is shown."""
    pinned = ", P: the pinned plan" if any(p.is_pinned for p in plans) else ""
    return f"H: the heuristic's pick{pinned}, *: fastest measured"


def plan_mark(plan: PlanResult) -> str:
    """A plan's marks in a table, as PLAN_MARKS spells them out."""
    return (
        ("H" if plan.is_heuristic_pick else "")
        + ("P" if plan.is_pinned else "")
        + ("*" if plan.is_fastest else "")
    )
