"""Sweep: the form's configuration at every point of a grid, given as one or two varies in the
CLI's `--vary` syntax; the app runs the points one at a time (app/sweeping.py). A row a point, as
`sweep` writes it (tui.jobs.sweep.point_row, so the pane and the CLI agree on every figure), and a chart
along the first vary: TFLOPS (TB/s for decode shapes, where no matmul dominates) of cuDNN's
heuristic pick, of its fastest plan where that is another, of each equivalent form and peer that
ran, and the GPU's dense peak (tui.jobs.sweep_chart, which `sweep --plot` draws too; Save chart
writes it as SVG), with the fastest way along the sweep under it.

The table fits its pane (fitted.FittingTable): a peer's column is cuDNN's speed against it (the
headline's figure), and what the width cannot hold goes, the least needed first; why a point did
not run is said under the table, whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, Static
from textual_plotext import PlotextPlot

from ...jobs.sweep import varied_words
from ...jobs.sweep_chart import (
    FASTEST,
    PICK,
    decode_like,
    legend,
    pass_kinds,
    peak_lines,
    peers_that_ran,
    series,
    unrun_words,
    winners_words,
)
from ...model.statuses import PASS_KINDS, STATUS_CPU_ONLY, STATUS_OK
from ...present.fastest import record_cell
from ...present.format import multiple, pass_short, status_style, status_word, us
from .. import sweep_progress
from ..messages import SweepAsked
from ..navigation import PaneKeysInput
from ..sweep_progress import IDLE_WORDS, Progress
from .fitted import FittedStatic, FittingTable

VARY_HINTS = ("s=1024..32768x2", "then (optional) d=64,128")
NO_GPU_WORDS = (
    "Kernel times need a GPU ({why}): each point runs what a CPU can, and the table shows its status."
)
# a colour per implementation (RGB, so that the chart and its legend below draw the same one)
COLORS = ((0, 215, 255), (95, 135, 255), (255, 135, 0), (95, 215, 95), (215, 95, 215), (255, 215, 0),
          (175, 175, 175), (255, 255, 255))  # fmt: skip
PEAK_COLOR = (255, 85, 85)
MARKERS = ("braille", "•", "x", "+", "o", "*", "#")  # a marker per value of the second vary
INTENSITY = "F/B, ridge"  # the column of a point's FLOP per byte against the GPU's ridge point
SPEED_WORDS = "peer columns: cuDNN's speed against each (above 1: cuDNN is faster)"


def legend_text(names: list[str], seconds: list[str], peaks: list[str], winners: str = "") -> Text:
    """The chart's legend: a colour per implementation and peak; with a second vary, a marker per
    value of it; then the fastest way along the sweep."""
    text = Text()
    for i, name in enumerate(names):
        text.append("━━ ", style="rgb({},{},{})".format(*COLORS[i % len(COLORS)]))
        text.append(f"{name}  ")
    for name in peaks:
        text.append("━━ ", style="rgb({},{},{})".format(*PEAK_COLOR))
        text.append(f"{name}  ")
    if any(seconds):
        text.append("\n")
        for i, second in enumerate(seconds):
            marker = MARKERS[i % len(MARKERS)]
            text.append(f"{'⠒⠒' if marker == 'braille' else marker * 2} {second}  ")
    if winners:
        text.append(f"\n{winners}", style="bold")
    text.append(f"\n{PICK}: cuDNN's heuristic pick, {FASTEST}: its fastest plan", style="dim")
    return text


# ---- the table ----------------------------------------------------------------------------
def _has_share(rows: list[dict]) -> bool:
    return any((p.get("roofline") or {}).get("share") is not None for r in rows for p in r["passes"].values())


@dataclass(frozen=True)
class _Columns:
    """The table's columns for its rows: the passes that ran, whether a share of peak is known, each
    pass's peers that ran, the passes with a fastest plan recorded."""

    kinds: list[str]
    share: bool
    peers: dict[str, list[str]]
    won: set[str]

    @classmethod
    def of(cls, rows: list[dict]) -> _Columns:
        kinds = pass_kinds(rows)
        return cls(
            kinds=kinds,
            share=_has_share(rows),
            peers={kind: peers_that_ran(rows, kind) for kind in kinds},
            won={k for k in kinds if any(r.get("passes", {}).get(k, {}).get("fastest") for r in rows)},
        )

    @staticmethod
    def head(kind: str, column: str) -> str:
        """A pass's column: a later pass's named by its short name first (`bwd kernel`)."""
        return column if kind == PASS_KINDS[0] else f"{pass_short(kind)} {column}"

    def heads(self, labels: list[str]) -> list[str]:
        heads = [*labels, "status"]
        for kind in self.kinds:
            extra = ("of peak", "bound", INTENSITY) * self.share + tuple(self.peers[kind])
            heads += [self.head(kind, c) for c in ("kernel", "TFLOPS", *extra)]
            heads += [self.head(kind, "fastest")] * (kind in self.won)
        return heads

    def drops(self) -> tuple[str, ...]:
        """The columns that go as the width runs out, the first first: each pass's FLOP per byte,
        bound and fastest way (a later pass's first), its peers (the last first), a later pass's own
        figures, then the first pass's share of peak."""
        later = self.kinds[::-1]
        out = [self.head(k, c) for c in (INTENSITY, "bound", "fastest") for k in later]
        out += [self.head(k, short) for k in later for short in self.peers[k][::-1]]
        out += [self.head(k, c) for k in later[:-1] for c in ("of peak", "TFLOPS", "kernel")]
        return (*out, *(self.head(k, "of peak") for k in self.kinds[:1]))

    def cells(self, row: dict, labels: list[str]) -> list[Any]:
        status = row.get("status", "")
        cells: list[Any] = [str(row.get("varied", {}).get(lab, "-")) for lab in labels]
        cells.append(Text(status_word(status), style=status_style(status)))
        for kind in self.kinds:
            cells += self._pass_cells(row.get("passes", {}).get(kind, {}), kind)
        return cells

    def _pass_cells(self, p: dict, kind: str) -> list[Any]:
        tflops = p.get("tflops")
        cells: list[Any] = [us(p.get("kernel_us")), "-" if tflops is None else f"{tflops:.1f}"]
        cells += _roofline_cells(p) if self.share else []
        cells += [speed_cell(p.get("peers", {}).get(short)) for short in self.peers[kind]]
        return cells + ([record_cell(p.get("fastest"))] if kind in self.won else [])


def _roofline_cells(p: dict) -> list[str]:
    """A point on the roofline: the share of the bounding peak reached, the bound, and its FLOP per
    byte against the GPU's ridge point ("63%", "compute", "3277/206"; the CLI's "63% compute,
    3277/206 F/B")."""
    line = p.get("roofline") or {}
    if line.get("share") is None:
        return ["-", "-", "-"]
    intensity = line.get("intensity")
    where = "-" if intensity is None else f"{intensity:.0f}/{line['ridge']:.0f}"
    return [f"{line['share'] * 100:.0f}%", line.get("bound") or "-", where]


def speed_cell(peer: dict | None) -> str:
    """cuDNN's speed against a peer ("1.95x"); the peer's kernel time where cuDNN has none to set
    against it; '-' where it did not run."""
    if not peer or peer.get("kernel_us") is None:
        return "-"
    speed = peer.get("cudnn_speedup")
    return multiple(speed) if speed else us(peer["kernel_us"])


def said_lines(rows: list[dict]) -> list[Text]:
    """Why each point that did not run did not, in its status's colour: a line each, whole."""
    return [
        Text(f"{varied_words(r.get('varied', {}))}: {r['message']}", style=status_style(r.get("status", "")))
        for r in rows
        if r.get("message") and r.get("status") not in (STATUS_OK, STATUS_CPU_ONLY)
    ]


class SweepTable(FittingTable):
    """A row a point: the varied values, status, and each pass's kernel time and TFLOPS, the share
    of the GPU's peak, the bound and the FLOP per byte where they are known, cuDNN's speed against
    each peer and the fastest way (a later pass's columns named by its short name, `bwd`); a
    narrow pane leaves out what `_Columns.drops` names, in turn."""

    class Refitted(Message):
        """The columns shown changed with the width."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.peer_heads: set[str] = set()  # the peers' columns

    def show_rows(self, rows: list[dict], labels: list[str]) -> None:
        columns = _Columns.of(rows)
        at = self.cursor_row
        self.clear(columns=True)
        self.drops = columns.drops()
        self.peer_heads = {columns.head(k, short) for k in columns.kinds for short in columns.peers[k]}
        self.add_columns(*columns.heads(labels))
        for r in rows:
            self.add_row(*columns.cells(r, labels), key=r.get("key"))
        self.refit()  # this frame shows the columns that fit, not those kept whatever the width
        if rows:
            self.move_cursor(row=min(at, len(rows) - 1))

    def refitted(self) -> None:
        self.post_message(self.Refitted())

    @property
    def shows_peers(self) -> bool:
        """Whether a peer's column is on show."""
        return bool(self.peer_heads & set(self.shown_labels))


# ---- the pane -----------------------------------------------------------------------------
class SweepPane(VerticalScroll):
    """The varies and Start, the sweep's status line, what is missing without a GPU, the table, the
    chart and its legend, the peers that ran at no point; `rows` and `lines` are what the table
    and the chart show (the tests read them)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.progress = Progress()
        self.labels: list[str] = []  # the varies' names, in order
        self.xs: list[str] = []  # the first vary's values, as the chart's x axis names them
        self.rows: list[dict] = []
        self.lines: dict[str, list[tuple[int, float]]] = {}
        self.no_gpu = ""

    def compose(self) -> ComposeResult:
        for i, hint in enumerate(VARY_HINTS, start=1):
            with Horizontal(classes="sweep-vary"):
                yield Label("vary" if i == 1 else "and", classes="sweep-label")
                yield PaneKeysInput(placeholder=hint, id=f"sweep-vary-{i}", compact=True)
            yield FittedStatic("", id=f"sweep-error-{i}", classes="sweep-error")
        with Horizontal(id="sweep-bar"):
            yield Button("Start", id="sweep-start", variant="primary", compact=True)
            yield Button("Save chart", id="sweep-save", compact=True)  # as SVG, into the current folder
            yield FittedStatic(IDLE_WORDS, id="sweep-status")
        yield FittedStatic("", id="sweep-note")  # what is missing without a GPU
        yield SweepTable(id="sweep-table")
        yield FittedStatic("", id="sweep-below")  # how to read the peers' columns; why a point did not run
        yield PlotextPlot(id="sweep-chart")
        yield FittedStatic("", id="sweep-legend")  # below the chart: plotext's own hides lines, or itself
        yield FittedStatic("", id="sweep-unrun")  # the peers that ran at no point, and why

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)
        for part in (
            "#sweep-note",
            "#sweep-table",
            "#sweep-below",
            "#sweep-chart",
            "#sweep-legend",
            "#sweep-unrun",
            "#sweep-save",
        ):
            self.query_one(part).display = False

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(self.query_one(f"#sweep-vary-{i}", Input).value for i in (1, 2))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "sweep-save":
            self.save_chart()
        else:
            self.post_message(SweepAsked(self.texts))

    def save_chart(self, path: str | None = None) -> tuple[str, bool]:
        """The chart as `sweep --plot` draws it (jobs/sweep_plot.py), to `path` or a new SVG in the
        current folder named by the first vary; said in a toast, and returned (the line, written)."""
        from ...jobs.sweep_plot import save_chart
        from ...store.files import resolved

        if path is None:
            stem = f"sweep-{(self.labels or ['chart'])[0]}"
            path = next(
                str(p)
                for n in range(1, 10_000)
                if not (p := resolved(f"{stem}{'' if n == 1 else f'-{n}'}.svg")).exists()
            )
        words, ok = save_chart(self.rows, path)
        self.app.notify(words, title="Chart saved" if ok else "Chart not saved",
                        severity="information" if ok else "warning", markup=False)  # fmt: skip
        return words, ok

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(SweepAsked(self.texts))

    # ---- what the app says ------------------------------------------------------------------
    def show_errors(self, errors: dict[int, str]) -> None:
        """Each vary's problem under it (by its place from 1); nothing starts while there is one."""
        for i in (1, 2):
            line = self.query_one(f"#sweep-error-{i}", Static)
            line.update(Text(errors.get(i, "")))
            line.set_class(i in errors, "-visible")

    def begin(self, labels: list[str], xs: list[str], total: int, no_gpu: str) -> None:
        """A new sweep: its varies, the first's values (the x axis), how many points; the last
        sweep's rows go."""
        self.show_errors({})
        self.labels, self.xs, self.rows, self.no_gpu = labels, xs, [], no_gpu
        self.say(Progress(total=total, started=sweep_progress.clock()))
        self.query_one("#sweep-start", Button).disabled = True
        self.query_one(SweepTable).display = True
        self._show()

    def say(self, progress: Progress) -> None:
        self.progress = progress
        self.query_one("#sweep-status", Static).update(Text(progress.words()))
        if progress.finished:
            self.query_one("#sweep-start", Button).disabled = False

    def add_row(self, row: dict) -> None:
        """A finished point: the table and the chart are drawn again with it."""
        self.rows.append(row)
        self._show()

    def _tick(self) -> None:
        if self.progress.active:
            self.say(self.progress)

    def _show(self) -> None:
        self.query_one(SweepTable).show_rows(self.rows, self.labels)
        cpu = self.no_gpu or any(r.get("status") == STATUS_CPU_ONLY for r in self.rows)
        for part, words in (
            ("#sweep-note", NO_GPU_WORDS.format(why=self.no_gpu or "no usable GPU") if cpu else ""),
            ("#sweep-unrun", unrun_words(self.rows)),
        ):
            line = self.query_one(part, Static)
            line.update(Text(words, style="yellow"))
            line.display = bool(words)
        self._say_below()
        self._draw()

    def on_sweep_table_refitted(self, event: SweepTable.Refitted) -> None:
        event.stop()
        self._say_below()

    def _say_below(self) -> None:
        """Under the table: how to read the peers' columns where one is on show, then why each
        point that did not run did not."""
        lines = [Text(SPEED_WORDS, style="dim")] * self.query_one(SweepTable).shows_peers
        lines += said_lines(self.rows)
        below = self.query_one("#sweep-below", Static)
        below.update(Text("\n").join(lines))
        below.display = bool(lines)

    def _draw(self) -> None:
        """A line per implementation (a colour each) and value of the second vary (a marker each),
        the peak as a line of its own; the legend under the chart names each."""
        decode = decode_like(self.rows)
        lines = series(self.rows, self.labels, self.xs, decode)
        self.lines = {legend(line): points for line, points in lines.items()}
        peaks, why = peak_lines(self.rows, decode) if lines else ({}, "")
        names = list(dict.fromkeys(name for name, _ in lines))
        seconds = list(dict.fromkeys(second for _, second in lines))
        plot = self.query_one("#sweep-chart", PlotextPlot)
        plot.display = self.query_one("#sweep-legend").display = bool(lines)  # nothing timed: no empty frame
        self.query_one("#sweep-save").display = bool(lines)  # a chart to save
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self._title(decode, why))
        for (name, second), points in lines.items():
            xs, ys = zip(*points, strict=True)
            color, marker = (
                COLORS[names.index(name) % len(COLORS)],
                MARKERS[seconds.index(second) % len(MARKERS)],
            )
            plt.plot(list(xs), list(ys), color=color, marker=marker)
        for value in peaks.values():
            plt.plot([1, max(len(self.xs), 1)], [value, value], color=PEAK_COLOR, marker="braille")
        if lines:
            top = max([y for points in lines.values() for _, y in points] + list(peaks.values()))
            plt.ylim(0, top * 1.1)
            plt.xticks(list(range(1, len(self.xs) + 1)), self.xs)
            plt.xlim(0.8, len(self.xs) + 0.2)
            plt.xlabel(self.labels[0])
        plot.refresh()
        winners = winners_words(self.rows)
        self.query_one("#sweep-legend", Static).update(legend_text(names, seconds, list(peaks), winners))

    def _title(self, decode: bool, why: str) -> str:
        """What is drawn against what, and why there is no peak line."""
        what = f"forward {'TB/s' if decode else 'TFLOPS'} by {self.labels[0]}"
        return what + (" (decode: one query a point)" if decode else "") + (f"; {why}" if why else "")
