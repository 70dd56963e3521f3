"""A sweep's chart as a file for a report (`sweep --plot FILE.png|svg`, the Sweep pane's Save
chart): the lines the pane draws (sweep_chart.py) along the first vary, a line per cuDNN plan
choice, equivalent form and peer, the GPU's peak as a dashed line, a star on the fastest way at
each point, and the versions (cuDNN, the frontend, torch) and the GPU in the legend. matplotlib is
an optional dependency (`uv sync --extra plots`): without it, one line says how to get it."""

from __future__ import annotations

import io
from pathlib import Path

from .sweep_chart import FASTEST, PICK, decode_like, forward, legend, peak_lines, series, winners_words

PLOT_SUFFIXES = (".png", ".svg")
NO_MATPLOTLIB = "the chart needs matplotlib: uv sync --extra plots (or pip install matplotlib)"
LINE_STYLES = ("-", "--", ":", "-.")  # a style per value of the second vary


def plot_problem(path: str) -> str:
    """Why a chart cannot be written to `path` ('' when it can be tried): its suffix, matplotlib."""
    if Path(path).suffix.lower() not in PLOT_SUFFIXES:
        return f"{path}: give a .png or .svg file name"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return NO_MATPLOTLIB
    return ""


# the terminal chart's short names, spelled out where a report's legend has the room
SPELLED = {PICK: "cuDNN H (the heuristic's pick)", FASTEST: "cuDNN * (its fastest plan)"}


def versions_words(rows: list[dict]) -> str:
    """'cuDNN 9.19.0, frontend 1.32.0, torch 2.11.0; NVIDIA H200': the first point that says."""
    found = next((r["versions"] for r in rows if r.get("versions")), {})
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), "")
    parts = [f"{name} {found[key]}" for key, name in (("cudnn", "cuDNN"), ("frontend", "frontend"),
             ("torch", "torch")) if found.get(key)]  # fmt: skip
    return f"{', '.join(parts) or 'versions not recorded'}" + (f"; {gpu}" if gpu else "")


def labels_of(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(k for r in rows for k in r.get("varied", {})))


def chart_bytes(rows: list[dict], suffix: str, title: str = "") -> bytes:
    """The chart of `rows` as PNG or SVG bytes (`suffix` '.png' or '.svg'); ValueError where no
    point was timed (nothing to draw). matplotlib is imported here, never at start."""
    from matplotlib.figure import Figure

    labels = labels_of(rows)
    if not labels:
        raise ValueError("no point of the sweep has a varied value")
    xs = list(dict.fromkeys(str(r.get("varied", {}).get(labels[0])) for r in rows))
    decode = decode_like(rows)
    lines = series(rows, labels, xs, decode)
    if not lines:
        raise ValueError("no point was timed: there is nothing to draw (kernel times need a GPU)")
    peaks, why = peak_lines(rows, decode)
    names = list(dict.fromkeys(name for name, _ in lines))
    seconds = list(dict.fromkeys(second for _, second in lines))
    fig = Figure(figsize=(11, 5.2), layout="constrained")
    ax = fig.subplots()
    colors = [f"C{i % 10}" for i in range(len(names))]
    for (name, second), points in lines.items():
        x, y = zip(*points, strict=True)
        style = LINE_STYLES[seconds.index(second) % len(LINE_STYLES)]
        ax.plot(
            x,
            y,
            style,
            marker="o",
            ms=4,
            color=colors[names.index(name)],
            label=legend((SPELLED.get(name, name), second)),
        )
    for name, value in peaks.items():
        ax.axhline(value, color="red", ls="--", lw=1, label=name)
    _stars(ax, rows, labels, xs, lines)
    unit = "TB/s" if decode else "TFLOPS"
    ax.set_xticks(range(1, len(xs) + 1), xs)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(f"forward {unit}")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(
        title or f"forward {unit} by {labels[0]}" + (" (decode: one query a point)" if decode else "")
    )
    ax.legend(title=versions_words(rows), fontsize="small", title_fontsize="small", loc="upper left",
              bbox_to_anchor=(1.01, 1.0))  # fmt: skip
    notes = [w for w in (winners_words(rows), why) if w]
    if notes:
        fig.supxlabel("; ".join(notes), fontsize="small")
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix.lstrip(".").lower())
    return buf.getvalue()


def _stars(ax, rows: list[dict], labels: list[str], xs: list[str], lines: dict) -> None:
    """A star on the line of the fastest way at each point, where that way has a line."""
    marked = False
    for r in rows:
        varied = r.get("varied", {})
        name = (forward(r).get("fastest") or {}).get("name")
        second = f"{labels[1]}={varied.get(labels[1])}" if len(labels) > 1 else ""
        x = xs.index(str(varied.get(labels[0]))) + 1
        y = dict(lines.get((name, second), [])).get(x)
        if y is not None:
            ax.plot([x], [y], "*", ms=13, color="gold", mec="black", zorder=5,
                    label=None if marked else "the fastest way at the point")  # fmt: skip
            marked = True


def write_chart(rows: list[dict], path: str, title: str = "") -> Path:
    """The chart written to `path` (its suffix says PNG or SVG), atomically; the file written.
    ValueError: nothing to draw or a bad suffix; OSError: the file could not be written."""
    from ..store.files import atomic_write

    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise ValueError(f"{path}: give a .png or .svg file name")
    return atomic_write(path, chart_bytes(rows, suffix, title))


def save_chart(rows: list[dict], path: str, title: str = "") -> tuple[str, bool]:
    """Write the chart, and the line that says so: ('wrote the chart to PATH', True), or why not
    (nothing timed; matplotlib missing; the disk refused) and False."""
    problem = plot_problem(path)
    if problem:
        return problem, False
    try:
        written = write_chart(rows, path, title)
    except ValueError as exc:
        return f"no chart written: {exc}", False
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}", False
    return f"wrote the chart to {written}", True
