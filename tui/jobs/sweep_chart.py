"""What a sweep's chart draws, read from its rows (tui.jobs.sweep.point_row): along the first vary,
TFLOPS (TB/s for decode shapes, where no matmul dominates) of cuDNN's heuristic pick, of its fastest
plan where that is another, of each equivalent form and each peer that ran, and the GPU's dense
peak; and the fastest way at each point. The Sweep pane draws it in the terminal, `sweep --plot`
and the pane's Save chart as a file (sweep_plot.py): the same lines, from the same functions."""

from __future__ import annotations

from ..model.gpu_peaks import peak_for
from ..model.statuses import PASS_KINDS

PICK, FASTEST = "cuDNN H", "cuDNN *"  # the chart's names, as the Peers pane's


def pass_kinds(rows: list[dict]) -> list[str]:
    return [k for k in PASS_KINDS if any(k in r.get("passes", {}) for r in rows)]


def peers_that_ran(rows: list[dict], kind: str = PASS_KINDS[0]) -> list[str]:
    """A pass's peers timed at some point, in the order they were asked for."""
    passes = (r.get("passes", {}).get(kind, {}) for r in rows)
    return list(
        dict.fromkeys(s for p in passes for s, peer in p.get("peers", {}).items() if peer.get("kernel_us"))
    )


def forward(row: dict) -> dict:
    return row.get("passes", {}).get(PASS_KINDS[0], {})


def unrun_words(rows: list[dict]) -> str:
    """The peers asked for that ran at no point, and why (as the first point said it; peers of
    one reason named together)."""
    ran = set(peers_that_ran(rows))
    why: dict[str, str] = {}
    for r in rows:
        for short, peer in forward(r).get("peers", {}).items():
            if short not in ran and peer.get("reason"):
                why.setdefault(short, peer["reason"])
    by_reason: dict[str, list[str]] = {}
    for short, reason in why.items():
        by_reason.setdefault(reason, []).append(short)
    return "; ".join(f"{', '.join(shorts)} ran at no point: {reason}" for reason, shorts in by_reason.items())


def decode_like(rows: list[dict]) -> bool:
    """One query a point (s_q = 1): memory-bound, so read against the bandwidth, not the FLOPs."""
    return bool(rows) and all(r.get("config", {}).get("s_q") == 1 for r in rows)


def rate(p: dict, kernel_us: float | None, decode: bool) -> float | None:
    """TFLOPS (TB/s when `decode`) of a kernel time over the pass's FLOPs (minimum bytes)."""
    amount = p.get("io_bytes" if decode else "flops")
    return amount / kernel_us / 1e6 if kernel_us and amount else None


def figures(row: dict, decode: bool) -> dict[str, float | None]:
    """One point's figure per implementation: the pick's as point_row gives it, the fastest plan's
    (the pick's own where it is the fastest), each equivalent form's ("cuDNN causal none"), each peer's."""
    p = forward(row)
    bandwidth = p.get("bandwidth_gbs")
    pick = (bandwidth / 1000 if bandwidth else None) if decode else p.get("tflops")
    found: dict[str, float | None] = {PICK: pick}
    if p.get("fastest_us"):
        found[FASTEST] = rate(p, p["fastest_us"], decode)
    for words, form in (p.get("forms") or {}).items():
        found[f"cuDNN {words}"] = rate(p, form.get("kernel_us"), decode)
    for short, peer in p.get("peers", {}).items():
        found[short] = rate(p, peer.get("kernel_us"), decode) if decode else peer.get("tflops")
    return found


Line = tuple[str, str]  # (implementation, the second vary's value as `d=64`, or "")


def series(
    rows: list[dict], labels: list[str], xs: list[str], decode: bool
) -> dict[Line, list[tuple[int, float]]]:
    """Each line of the chart: (x position from 1, figure) per point. The first vary's values go
    along x; with a second vary, a line per implementation and value of the second (in that
    order: the legend groups an implementation's lines)."""
    lines: dict[Line, list[tuple[int, float]]] = {}
    for r in rows:
        varied = r.get("varied", {})
        x = xs.index(str(varied.get(labels[0]))) + 1
        second = f"{labels[1]}={varied.get(labels[1])}" if len(labels) > 1 else ""
        for name, value in figures(r, decode).items():
            if value is not None:
                lines.setdefault((name, second), []).append((x, value))
    for second in {second for _, second in lines}:  # a fastest plan that is the pick at every point
        if lines.get((FASTEST, second)) == lines.get((PICK, second)):
            lines.pop((FASTEST, second), None)
    names = list(dict.fromkeys(name for name, _ in lines))
    seconds = list(dict.fromkeys(second for _, second in lines))
    return dict(sorted(lines.items(), key=lambda kv: (names.index(kv[0][0]), seconds.index(kv[0][1]))))


def legend(line: Line) -> str:
    """A line's name: 'FLASH', or 'FLASH d=64' with a second vary."""
    return " ".join(part for part in line if part)


def peak_lines(rows: list[dict], decode: bool) -> tuple[dict[str, float], str]:
    """The GPU's dense peak (its bandwidth for decode shapes) by legend name, one per dtype swept;
    or why there is none."""
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), "")
    peak = peak_for(gpu) if gpu else None
    if peak is None:
        return {}, f"peak unknown for {gpu}" if gpu else ""
    if decode:
        return {f"peak {peak.bandwidth_tbs:g} TB/s ({peak.name})": peak.bandwidth_tbs}, ""
    dtypes = list(dict.fromkeys(r.get("config", {}).get("dtype", "") for r in rows))
    found = {d: peak.tflops(d) for d in dtypes}
    lines = {f"peak {v:g} ({peak.name} {d})": v for d, v in found.items() if v is not None}
    missing = [d for d, v in found.items() if v is None]
    return lines, f"no {', '.join(missing)} peak for {peak.name}" if missing else ""


def winners_words(rows: list[dict]) -> str:
    """The fastest way along the sweep: 'fastest: FA4 at 5 points (up to 1.11x cuDNN's pick), cuDNN H
    at 1'; '' where no point had a contest."""
    won: dict[str, list[float]] = {}
    for r in rows:
        record = forward(r).get("fastest") or {}
        if record.get("name"):
            won.setdefault(record["name"], []).append(record.get("margin") or 1.0)
    parts = []
    for name, margins in sorted(won.items(), key=lambda kv: -len(kv[1])):
        best = max(margins)
        gain = f" (up to {best:.2f}x cuDNN's pick)" if best > 1.0 else ""
        parts.append(f"{name} at {len(margins)} point{'s' if len(margins) > 1 else ''}{gain}")
    return f"fastest: {', '.join(parts)}" if parts else ""
