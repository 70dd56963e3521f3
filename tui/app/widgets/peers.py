"""Peers: the other attention implementations the run timed beside cuDNN, on the same tensors and
against the same reference, as a table (cuDNN's heuristic pick first) and a bar of kernel time
each; or, where there are none, how to ask for them or why they did not run."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ...model.fastest import declined, fastest_way
from ...model.results import PassResult, RunResult, TimingStats
from ...model.statuses import BACKWARD, STATUS_CPU_ONLY, STATUS_MISMATCH, STATUS_OK
from ...present.fastest import change_line, fastest_line, finding_lines
from ...present.format import (
    PEER_COLUMNS,
    multiple,
    peer_errors,
    peer_standing,
    peers_unrun,
    sci,
    seconds,
    speed_multiple,
    status_word,
    us,
    verdict_words,
)
from ...present.peer_steps import STEP_COLUMNS, STEP_TITLE, StepRow, step_cells, step_rows
from .fitted import FittedStatic, FittingTable

HOW_TO_ASK = (
    "Tick peers in the form (its peers section), or give the CLI "
    "--peers flash,flex (or --peers all): each is timed and checked on the same tensors as cuDNN."
)
SPEED_WORDS = "cuDNN speed: a row's kernel time over cuDNN's heuristic pick's (above 1: cuDNN is faster)"
STEP_SPEED_WORDS = "cuDNN speed: a row's step over cuDNN's (above 1: cuDNN's step is faster)"
OFF_SCALE = 10.0  # a bar this many times the pick's time would flatten the others: named, not drawn


def no_peers_words(result: RunResult | None) -> str:
    """Why the pane has no peers: the run ended before they could run, or none was asked for (where
    cuDNN declined the forward, peers asked for run without it)."""
    if result is not None and result.forward is not None and declined(result.forward):
        return (
            f"No peers in this result: cuDNN did not run it, and peers asked for run without it. {HOW_TO_ASK}"
        )
    if result is not None and result.status not in (STATUS_OK, STATUS_CPU_ONLY, STATUS_MISMATCH):
        return f"No peers: the run ended {status_word(result.status)} before they could run. {HOW_TO_ASK}"
    return f"No peers in this result. {HOW_TO_ASK}"


@dataclass(frozen=True)
class Row:
    """One implementation as the table and the chart show it."""

    name: str  # the table's
    label: str  # the chart's: 'cuDNN H', 'cuDNN *', 'FLASH', 'Flex'
    timing: TimingStats | None
    tflops: float | None
    max_abs: float | None
    verdict: Text
    compile_s: float | None
    what: Text
    cudnn: bool = False


def head_words(p: PassResult) -> str:
    """How to read the table: cuDNN's speed against each row, or why there is none."""
    if peer_standing(p):
        return SPEED_WORDS
    if declined(p) and any(peer.timing is not None for peer in p.field_peers):
        return "cuDNN did not run this pass (its first row says why): the peers ran alone on its tensors"
    return "no peer was timed: each row says why"


def cudnn_rows(p: PassResult) -> list[Row]:
    """The heuristic's pick ('cuDNN H', 'cuDNN H*' when it is the fastest too), then the fastest
    plan where that is another ('cuDNN *'), with the marks of the Plans pane; where cuDNN did not
    run the pass, one row of its refusal."""
    if declined(p):
        what = Text(p.message or status_word(p.status), style="yellow")
        return [Row("cuDNN", "cuDNN", None, None, None, Text("-"), None, what, True)]
    pick, fastest = p.plan(p.heuristic_plan), p.plan(p.fastest_plan)
    shown = [(pick, "H" + ("*" if fastest is pick else ""), "the heuristic's pick")]
    if fastest is not None and fastest is not pick:
        shown.append((fastest, "*", "the fastest plan"))
    rows = []
    for plan, mark, role in shown:
        if plan is None:
            continue
        verdict = {True: Text("pass"), False: Text("FAIL", style="red"), None: Text("-")}[plan.matches]
        what = Text(f"{role}: plan {plan.index} {plan.name}")
        timing = p.timing if plan is pick else plan.timing
        tflops = p.tflops if plan is pick else plan.tflops
        name = f"cuDNN {mark}"
        rows.append(
            Row(name, name, timing, tflops, plan.max_abs_error, verdict, plan.build_seconds, what, True)
        )
    return rows


def form_rows(p: PassResult) -> list[Row]:
    """cuDNN on each equivalent form of the configuration (the same scores, planned afresh)."""
    rows = []
    for f in p.forms:
        verdict = {True: Text("pass"), False: Text("FAIL", style="red"), None: Text("-")}[f.matches]
        what = Text(f"equivalent form: {f.why}; plan {f.plan}" if f.timing else f.reason)
        name = f"cuDNN {f.words}"
        rows.append(Row(name, name, f.timing, f.tflops, f.max_abs_error, verdict, None, what, True))
    return rows


def fastest_row(p: PassResult) -> list[Row]:
    """The fastest way (model/fastest.py), for the table only: the winner and its margin."""
    way = fastest_way(p)
    if way is None:
        return []
    w = way.winner
    what = Text(fastest_line(way) + "".join(f"; {x}" for x in (change_line(way), *finding_lines(way)) if x))
    verdict = Text(w.verdict, style="" if w.passed is not False else "red")
    return [Row(f"fastest: {w.name}", "", w.timing, None, w.max_abs, verdict, None, what)]


def peer_rows(p: PassResult) -> list[Row]:
    """Each peer asked for: its figures, its error of O, what it is or why it did not run."""
    errors = peer_errors(p)
    rows = []
    for peer in p.field_peers:
        m = errors.get(peer.name)
        verdict = Text(verdict_words(m), style="" if m.passed else "red") if m is not None else Text("-")
        what = Text(peer.description) if peer.ran else Text(peer.reason, style="yellow")
        if peer.timing_method:
            what.append(f"; timed by {peer.timing_method}", style="dim")
        max_abs = m.max_abs if m is not None else None
        rows.append(
            Row(peer.name, peer.short, peer.timing, peer.tflops, max_abs, verdict, peer.compile_seconds, what)
        )
    return rows


class PeerTable(FittingTable):
    """cuDNN's heuristic pick (and its fastest plan where that is another), then each peer; a
    narrow pane leaves out what each is, its compile time, then its TFLOPS and verdict."""

    DROPS = (PEER_COLUMNS[-1], PEER_COLUMNS[-2], "TFLOPS", "verdict")

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.add_columns(*PEER_COLUMNS)

    def show_rows(self, p: PassResult, rows: list[Row]) -> None:
        self.clear()
        for r in rows:
            self.add_row(
                Text(r.name, style="bold cyan" if r.cudnn else ""),
                us(r.timing.median_us) if r.timing else "-",
                f"{r.tflops:.1f}" if r.tflops else "-",
                multiple(speed_multiple(p, r.timing)),
                sci(r.max_abs),
                r.verdict,
                seconds(r.compile_s),
                r.what,
            )


class PeerStepTable(FittingTable):
    """The training step against the peers (present/peer_steps.py): cuDNN's step, then each
    peer's forward, backward and step; a narrow pane leaves out why a peer has no step, then its
    forward's and backward's times (the step, cuDNN's speed and the verdict stay)."""

    DROPS = (STEP_COLUMNS[-1], STEP_COLUMNS[1], STEP_COLUMNS[2])

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.add_columns(*STEP_COLUMNS)

    def show_rows(self, rows: list[StepRow]) -> None:
        self.clear()
        for row in rows:
            self.add_row(*step_cells(row, rows, short=True))  # the precision is the forward table's


class PeersPane(VerticalScroll):
    """The forward's peers: a head line, the table and the chart; with the backward's peers, the
    training step against them (forward + backward each) under the table."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.bars: dict[str, float] = {}  # chart label -> kernel µs, top to bottom
        self.off_scale: dict[str, float] = {}  # label -> cuDNN's speed multiple, of those not drawn

    def compose(self) -> ComposeResult:
        yield FittedStatic(no_peers_words(None), id="peers-head")
        yield PeerTable(id="peers-table")
        yield FittedStatic("", id="peers-step-head")
        yield PeerStepTable(id="peers-step")
        yield PlotextPlot(id="peers-chart")
        yield FittedStatic("", id="peers-unrun")  # the peers that did not run and why, wider than a cell

    def on_mount(self) -> None:
        self._measured(False)
        self.query_one("#peers-step-head").display = self.query_one(PeerStepTable).display = False

    def show(self, result: RunResult) -> None:
        p = result.forward
        unrun = peers_unrun(p) if p is not None else ""
        head = self.query_one("#peers-head", Static)
        self._show_step(result)
        if p is None or not p.field_peers or unrun:
            head.update(Text(unrun, style="yellow") if unrun else no_peers_words(result))
            self._measured(False)
            return
        # where cuDNN stands is in the headline above; here, how to read the table
        text = Text(head_words(p), style="dim")
        if result.pass_of(BACKWARD) is not None and not step_rows(result):
            text.append("; no peer was timed for the backward in this result", style="dim")
        head.update(text)
        rows = cudnn_rows(p) + form_rows(p) + peer_rows(p)
        self.query_one(PeerTable).show_rows(p, rows + fastest_row(p))
        unrun_lines = [f"{peer.name} did not run: {peer.reason}" for peer in p.field_peers if not peer.ran]
        self.query_one("#peers-unrun", Static).update(Text("\n".join(unrun_lines), style="yellow"))
        self._measured(True)
        self._draw(p, rows)

    def _show_step(self, result: RunResult) -> None:
        """The training step's table, shown where the backward timed peers."""
        rows = step_rows(result)
        head = self.query_one("#peers-step-head", Static)
        if rows:
            head.update(Text.assemble((STEP_TITLE, "bold"), ("\n" + STEP_SPEED_WORDS, "dim")))
            self.query_one(PeerStepTable).show_rows(rows)
        head.display = self.query_one(PeerStepTable).display = bool(rows)

    def _measured(self, shown: bool) -> None:
        for part in ("#peers-table", "#peers-unrun", "#peers-chart"):
            self.query_one(part).display = shown

    def _draw(self, p: PassResult, rows: list[Row]) -> None:
        """A horizontal bar of kernel time each, top to bottom in the table's order, cuDNN's in a
        colour of their own; one slower than OFF_SCALE times the pick is named under the chart."""
        timed = [r for r in rows if r.timing is not None]
        speeds = {r.label: speed_multiple(p, r.timing) for r in timed}
        drawn = [r for r in timed if (speeds[r.label] or 0.0) <= OFF_SCALE]
        self.bars = {r.label: r.timing.median_us for r in drawn}
        self.off_scale = {r.label: speeds[r.label] for r in timed if r not in drawn}
        plot = self.query_one("#peers-chart", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("kernel time per implementation (µs)")
        at = {r.label: len(drawn) - i for i, r in enumerate(drawn)}  # the first row on top
        for cudnn, color in ((True, "cyan"), (False, "orange")):
            group = [r.label for r in drawn if r.cudnn is cudnn]
            if group:
                times = [self.bars[x] for x in group]
                plt.bar([at[x] for x in group], times, orientation="horizontal", width=0.4, color=color)
        if drawn:
            plt.yticks(list(at.values()), list(at))
            plt.ylim(0.5, len(drawn) + 0.5)  # two rows a bar: the bar and a gap
            off = ", ".join(f"{label} {multiple(x)}" for label, x in self.off_scale.items())
            plt.xlabel("µs (H heuristic's pick, * fastest plan)" + (f"; off the scale: {off}" if off else ""))
        plot.styles.height = 2 * len(drawn) + 6  # a row a bar and one between; title, frame, ticks, label
        plot.refresh()
