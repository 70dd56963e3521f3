"""Search: a knob search of the form's configuration (tui.model.knob_search), asked through the
app's engine client (app/searching.py). The budget and Start; the engine's words while it searches;
then the heuristic's pick against the best found and the fastest peer, the counts, the engines
searched and skipped (in tui.present.search's words, which `sdpa-explorer search` shares), a chart
of time along the best engine's main knob and the fastest candidates. Pin best puts the best found
into the form's pinned plan, which Ctrl+S then keeps in a preset."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Label, Static
from textual_plotext import PlotextPlot

from ...model.knob_search import HEURISTIC, Trial
from ...model.pins import Pin, parse
from ...model.search_results import SearchOptions, SearchResult
from ...present.format import fresh_words, placement_words, us
from ...present.search import (
    BEST_NAME,
    COUNTS_NAME,
    FINDING_NAME,
    PEER_NAME,
    PICK_NAME,
    PIN_NAME,
    SKIPPED_NAME,
    WENT_ON,
    counts_words,
    fresh_faster,
    gain_won,
    gain_words,
    peer_figure,
    pin_hint,
    space_words,
    wrong_words,
)
from ..messages import BestPinned, SearchAsked, SearchStopAsked
from ..navigation import PaneKeysInput
from .fitted import FittedStatic, FittingTable

TOP = 12  # candidates the table lists, fastest first (as the CLI's table)
IDLE_WORDS = (
    "Search cuDNN's knob space for plans the heuristic does not offer: each candidate is built, "
    "checked against the fp32 reference and timed, within the budget. Start (or Enter in the "
    "budget) begins; Esc stops it at the next candidate, keeping what it found."
)
RUNNING_WORDS = (
    "Esc or Cancel stops it at the next candidate, keeping what it found; form edits wait for its end"
)
# the chart's marks: a candidate that passed, one that failed the check, the heuristic's, the best
PASSED, WRONG, PICKED, BEST = ("•", "cyan"), ("x", "red"), ("H", "yellow"), ("◆", "green")
COLORS = {"cyan": (0, 215, 255), "red": (255, 85, 85), "yellow": (255, 215, 0), "green": (95, 215, 95)}


def trial_text(t: Trial | None) -> Text:
    """A trial's time and plan (what a pin names), cuDNN's name of it after them."""
    if t is None:
        return Text("-")
    return Text(f"{us(t.time_us)}  {t.plan}").append(f"  {t.name}" if t.name else "", style="dim")


def summary_rows(r: SearchResult) -> Table:
    """What was searched and what it found: the pick, the best and the fastest peer with their
    times, the counts, the engines searched and those skipped, the faster candidates that are wrong."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(PICK_NAME, trial_text(r.pick))
    _best_rows(grid, r)
    peer = peer_figure(r)
    if peer is not None:
        grid.add_row(PEER_NAME, f"{peer[1]}  {peer[0]}")
    grid.add_row(COUNTS_NAME, counts_words(r, crashed=True))
    for s in r.spaces:
        grid.add_row("searched", space_words(s))
    for words in r.skipped:
        grid.add_row(SKIPPED_NAME, Text(words, style="dim"))
    for words in getattr(r, "crashes", ()):
        grid.add_row("crashed", Text(f"{words} ({WENT_ON})", style="yellow"))
    wrong = wrong_words(r)
    if wrong:
        grid.add_row(FINDING_NAME, Text(wrong, style="yellow"))
    give, kept = pin_hint(r, keys=True)
    if give:
        grid.add_row(PIN_NAME, Text(f"{give} ({kept})", style="cyan"))
    return grid


def _best_rows(grid: Table, r: SearchResult) -> None:
    """The best found and its gain on the pick, where it moved with the inputs, a fresh process."""
    if r.best is None:
        return
    grid.add_row(BEST_NAME, trial_text(r.best))
    grid.add_row("gain", Text(gain_words(r) or "-", style="bold green" if gain_won(r) else ""))
    if placement_words(r):
        grid.add_row("where inputs lie", Text(placement_words(r), style="dim"))
    if fresh_words(r):
        grid.add_row("fresh process", Text(fresh_words(r), style="green" if fresh_faster(r) else ""))


def ended_words(r: SearchResult) -> Text:
    """How the search ended: in its budget, stopped when asked, or why nothing was searched."""
    if r.status == "ok":
        return Text(
            f"searched {r.config.label()} in {r.elapsed_s:.1f} s of a {r.budget_s:.0f} s budget ({r.stopped})"
        )
    if r.status == "cancelled":
        return Text(f"stopped when asked after {r.elapsed_s:.1f} s: what it had found so far", style="yellow")
    return Text(f"{r.status.upper()}: {r.message}", style="bold red")


def pin_of(t: Trial) -> Pin | None:
    """A trial's engine and knobs; None for a plan no engine id names (the frontend's own)."""
    try:
        return parse(t.plan)
    except ValueError:
        return None


def main_knob(r: SearchResult, engine_id: int) -> str | None:
    """The best engine's knob its candidates took most values of: the chart's x axis."""
    values: dict[str, set[int]] = {}
    for t in r.trials:
        pin = pin_of(t)
        if pin is not None and pin.engine_id == engine_id:
            for name, value in pin.knobs:
                values.setdefault(name, set()).add(value)
    return max(values, key=lambda name: len(values[name])) if values else None


Marks = dict[tuple[str, str], list[tuple[int, float]]]


def chart_points(r: SearchResult) -> tuple[str, str, Marks]:
    """The title, the knob along x, and each mark's (knob value, µs) points along the main knob of the best found's
    engine: the candidates that passed, those that failed the check, the heuristic's, the best;
    build failures have no time and are not drawn."""
    best = r.best or r.pick
    if best is None:
        return "nothing timed: no chart", "", {}
    best_pin = pin_of(best)
    if best_pin is None:
        return f"{best.plan} names no engine: nothing to draw", "", {}
    engine = best_pin.engine_id
    knob = main_knob(r, engine)
    if knob is None:
        return f"engine {engine} has no knobs: nothing to draw along one", "", {}
    points: Marks = {mark: [] for mark in (PASSED, WRONG, PICKED, BEST)}
    for t in r.trials:
        pin = pin_of(t)
        value = pin.knob_dict().get(knob) if pin is not None and pin.engine_id == engine else None
        if value is None or t.time_us is None:
            continue
        mark = (PICKED if t.origin == HEURISTIC else PASSED) if t.passed else WRONG
        points[mark].append((value, t.time_us))
    value = best_pin.knob_dict().get(knob)
    if value is not None and best.time_us is not None:
        points[BEST].append((value, best.time_us))
    return f"engine {engine}: time by {knob} (µs)", knob, {mark: p for mark, p in points.items() if p}


def legend_text(r: SearchResult) -> Text:
    text = Text()
    for (marker, color), words in ((PASSED, "passed the check"), (WRONG, "failed the check (never the winner)"),
                                   (PICKED, "the heuristic's"), (BEST, "best found")):  # fmt: skip
        text.append(f"{marker} ", style=color).append(f"{words}  ")
    failed = r.counts()["build failed"]
    return text.append(f"\n{failed} that did not build are not drawn" if failed else "", style="dim")


class CandidateTable(FittingTable):
    """The fastest candidates timed (the pick and the best among them), a row each; a narrow pane
    leaves out cuDNN's name of the plan, the kernel count, where it came from, then the max abs
    error (the plan, its time and its status stay)."""

    DROPS = ("name", "kernels", "from", "max abs err")

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.add_columns("plan", "name", "from", "time", "kernels", "max abs err", "status")

    def show_trials(self, r: SearchResult) -> None:
        self.clear()
        timed = sorted((t for t in r.trials if t.time_us is not None), key=lambda t: t.time_us or 0)
        best = r.best
        for t in timed[:TOP]:
            plan = Text(t.plan, style="bold green" if best is not None and t.plan == best.plan else "")
            error = "-" if t.max_abs_error is None else f"{t.max_abs_error:.2e}"
            self.add_row(plan, t.name or "-", t.origin, us(t.time_us) + (" o" if t.overlapped else ""),
                         str(t.kernels or "-"), error, Text(t.status, style="" if t.passed else "red"))  # fmt: skip
        self.refit()  # this frame shows the columns that fit


class SearchPane(VerticalScroll):
    """The budget, Start, Cancel and Pin best; the search's line; what it found. `result` is the
    search shown (the tests read it)."""

    BINDINGS = [Binding("p", "pin_best", "Pin best")]

    result: SearchResult | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="search-bar"):
            yield Label("budget", classes="search-label")
            yield PaneKeysInput(f"{SearchOptions().budget_s:.0f}s", id="search-budget", compact=True,
                                tooltip="the search's own time: 60s, 2m, 90 ...")  # fmt: skip
            yield Button("Start", id="search-start", variant="primary", compact=True)
            yield Button("Cancel", id="search-cancel", compact=True, disabled=True)
            yield Button("Pin best", id="search-pin", compact=True, disabled=True)
        yield FittedStatic("", id="search-budget-error")
        yield FittedStatic(IDLE_WORDS, id="search-status")
        yield FittedStatic("", id="search-summary")
        yield PlotextPlot(id="search-chart")
        yield FittedStatic("", id="search-legend")
        yield FittedStatic("", id="search-table-head")
        yield CandidateTable(id="search-table")

    def on_mount(self) -> None:
        for part in (
            "#search-budget-error",
            "#search-chart",
            "#search-legend",
            "#search-table-head",
            "#search-table",
        ):
            self.query_one(part).display = False

    @property
    def budget_text(self) -> str:
        return self.query_one("#search-budget", PaneKeysInput).value

    # ---- the user's asks ---------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "search-start":
            self.post_message(SearchAsked(self.budget_text))
        elif event.button.id == "search-cancel":
            self.post_message(SearchStopAsked())
        else:
            self.action_pin_best()

    def on_input_submitted(self, event: PaneKeysInput.Submitted) -> None:
        event.stop()
        self.post_message(SearchAsked(self.budget_text))

    def action_pin_best(self) -> None:
        best = self.result.kept if self.result is not None else None
        if best is not None:
            self.post_message(BestPinned(best.plan, self.result.config))

    # ---- what the app says -------------------------------------------------------------------
    def show_budget_error(self, words: str) -> None:
        """The budget's problem under it (nothing starts while there is one); "" clears it."""
        line = self.query_one("#search-budget-error", Static)
        line.update(Text(words, style="red"))
        line.display = bool(words)
        self.query_one("#search-budget").set_class(bool(words), "-invalid")

    def say(self, words: str | Text, running: bool = False) -> None:
        """The search's line: what is asked or awaited, how far it is, how it ended."""
        self.query_one("#search-status", Static).update(words)
        self.query_one("#search-start", Button).disabled = running
        self.query_one("#search-cancel", Button).disabled = not running
        self.query_one("#search-pin", Button).disabled = (
            running or self.result is None or self.result.best is None
        )

    def progress(self, label: str, text: str) -> None:
        """The engine's words while it searches (its run of the form's configuration comes first)."""
        self.say(Text(f"{label}: {text}\n").append(RUNNING_WORDS, style="dim"), running=True)

    def show(self, r: SearchResult) -> None:
        """A search's answer: how it ended, what it found (an answer with no candidates says why)."""
        self.result = r
        self.say(ended_words(r))
        found = bool(r.trials)
        summary = self.query_one("#search-summary", Static)
        summary.update(summary_rows(r) if found or r.status == "ok" else "")
        self._draw(r)
        head = self.query_one("#search-table-head", Static)
        head.update(Text(f"Fastest candidates (of {len(r.trials)})", style="bold"))
        table = self.query_one(CandidateTable)
        head.display = table.display = found
        table.show_trials(r)

    def _draw(self, r: SearchResult) -> None:
        title, knob, points = chart_points(r)
        plot = self.query_one("#search-chart", PlotextPlot)
        plot.display = self.query_one("#search-legend").display = bool(points)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        for (marker, color), xy in points.items():
            xs, ys = zip(*xy, strict=True)
            plt.scatter(list(xs), list(ys), marker=marker, color=COLORS[color])
        if points:
            plt.xlabel(knob)
        plot.refresh()
        self.query_one("#search-legend", Static).update(legend_text(r))
