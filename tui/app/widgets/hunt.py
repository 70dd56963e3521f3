"""Hunt: random hazardous configurations run through the app's engine client (app/hunting.py,
tui.jobs.hunt: the CLI's `hunt` job), each failure shrunk to its smallest form and kept once. The
budget and the seed, a focus, Start and Stop; the hunt's line (its time, draws and what it does
now); the findings as they come, one row each: whose bug, the failure, its signature, how often
it was seen and its minimal configuration. Enter on a finding puts that configuration into the
form. The table fits its pane (fitted.FittingTable): where the width runs out the minimal
configuration moves under the table, a line each (as the CLI's table does), then the failure and
the signature wrap at their spaces."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Label

from ...jobs.hunt import DEFAULT_BUDGET_S, Hunt
from ...jobs.hunt_draw import FOCUS
from ...jobs.hunt_findings import Finding
from ...model.whose import CUDNN, TOOL
from ..messages import HuntAsked, HuntFindingChosen
from ..navigation import PaneKeysInput
from .fitted import FittedStatic, FittingTable

IDLE_WORDS = (
    "Hunt for wrong answers: random configurations with hazards run on the GPU, every output checked "
    "against fp32 and fp64; each failure shrunk to its smallest form and kept once, its bundle written "
    "for a report. Start (or Enter) begins; Stop (or Esc) ends it, keeping what it found; Enter on a "
    "finding loads its minimal configuration into the form."
)
WHOSE_STYLE = {CUDNN: "bold red", TOOL: "yellow"}
INPUTS = ("budget", "seed", "focus")
COLUMNS = ("#", "whose", "failure", "signature", "seen", "minimal configuration")
MINIMAL, SEEN = COLUMNS[-1], COLUMNS[-2]


def progress_words(job: Hunt, words: str) -> str:
    """The hunt's line: time against the budget, draws and findings, then what it does now."""
    found = len(job.findings)
    return (f"{job.elapsed_s:.0f} of {job.options.budget_s:.0f} s, {job.drawn} configurations, {found} finding"
            f"{'' if found == 1 else 's'}" + (f": {words}" if words else ""))  # fmt: skip


class FindingTable(FittingTable):
    """A row a finding, keyed by its number; a narrow pane leaves out the minimal configuration,
    then wraps the failure and the signature."""

    DROPS = (MINIMAL,)
    WRAPS = ("failure", "signature")

    class Refitted(Message):
        """The columns shown changed with the width."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def on_mount(self) -> None:
        self.add_columns(*COLUMNS)

    def refitted(self) -> None:
        self.post_message(self.Refitted())


class HuntPane(VerticalScroll):
    """The inputs, Start and Stop, the hunt's line, each input's problem, and the findings;
    `findings` is what the table shows (the tests read it)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.findings: dict[int, Finding] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(classes="hunt-inputs"):
            yield Label("budget", classes="hunt-label")
            yield PaneKeysInput(f"{DEFAULT_BUDGET_S / 60:g}m", id="hunt-budget", compact=True,
                                tooltip="the whole hunt's time, shrinking included: 90s, 6m ...")  # fmt: skip
            yield Label("seed", classes="hunt-label")
            yield PaneKeysInput(
                "0", id="hunt-seed", compact=True, tooltip="the same seed draws the same configurations"
            )
        with Horizontal(classes="hunt-inputs"):
            yield Label("focus", classes="hunt-label")
            yield PaneKeysInput(placeholder="paged,backward", id="hunt-focus", compact=True,
                                tooltip="features every draw has: " + ", ".join(FOCUS))  # fmt: skip
        with Horizontal(id="hunt-bar"):
            yield Button("Start", id="hunt-start", variant="primary", compact=True)
            yield Button("Stop", id="hunt-stop", compact=True, disabled=True)
        yield FittedStatic("", id="hunt-error")
        yield FittedStatic(IDLE_WORDS, id="hunt-status")
        yield FindingTable(id="hunt-table")
        yield FittedStatic("", id="hunt-below")  # each minimal configuration, where the table leaves it out

    def on_mount(self) -> None:
        for part in ("#hunt-error", "#hunt-table", "#hunt-below"):
            self.query_one(part).display = False

    def asked(self) -> HuntAsked:
        return HuntAsked(*(self.query_one(f"#hunt-{name}", PaneKeysInput).value for name in INPUTS))

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "hunt-stop":
            await self.run_action("app.stop")  # what Esc does: no more draws, what was found kept
        else:
            self.post_message(self.asked())

    def on_input_submitted(self, event: PaneKeysInput.Submitted) -> None:
        event.stop()
        self.post_message(self.asked())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        finding = self.findings.get(int(event.row_key.value or 0))
        if finding is not None:
            self.post_message(HuntFindingChosen(finding.shrunk.minimal))

    # ---- what the app says ------------------------------------------------------------------
    def show_errors(self, errors: dict[str, str]) -> None:
        """Each bad input's problem, naming it; its field marked."""
        for name in INPUTS:
            self.query_one(f"#hunt-{name}").set_class(name in errors, "-invalid")
        line = self.query_one("#hunt-error", FittedStatic)
        line.update(Text("; ".join(f"{name}: {words}" for name, words in errors.items()), style="red"))
        line.display = bool(errors)

    def say(self, words: str) -> None:
        self.query_one("#hunt-status", FittedStatic).update(Text(words))

    def begin(self, job: Hunt) -> None:
        """A new hunt: the last one's findings go."""
        self.findings = {}
        table = self.query_one(FindingTable)
        table.clear()
        table.display = False
        self._say_below()
        self.running(True)
        self.query_one("#hunt-status", FittedStatic).hold(True)  # the findings under it stay put
        self.progress(job, "starting")

    def progress(self, job: Hunt, words: str) -> None:
        self.say(progress_words(job, words))

    def show_finding(self, finding: Finding) -> None:
        """A new finding as a row, or a known one seen again (its count)."""
        table = self.query_one(FindingTable)
        table.display = True
        cells = (str(finding.number), Text(finding.whose.who, style=WHOSE_STYLE.get(finding.whose.who, "")),
                 str(finding.shrunk.failure), finding.signature_words(), str(finding.count),
                 finding.shrunk.minimal.label())  # fmt: skip
        key, known = str(finding.number), finding.number in self.findings
        self.findings[finding.number] = finding
        if known:  # seen again: its count; nothing under the table changes
            table.update_cell_of(key, SEEN, cells[4])
            return
        table.add_row(*cells, key=key)
        table.refit()  # this frame shows the columns that fit
        self._say_below()

    def on_finding_table_refitted(self, event: FindingTable.Refitted) -> None:
        event.stop()
        self._say_below()

    def _say_below(self) -> None:
        """Under the table, where it leaves the column out: each finding's minimal configuration,
        named as the CLI's lines under its table name it."""
        left_out = MINIMAL not in self.query_one(FindingTable).shown_labels
        lines = [Text(f"minimal (finding {n}): ", style="dim").append(f.shrunk.minimal.label())
                 for n, f in self.findings.items()] if left_out else []  # fmt: skip
        below = self.query_one("#hunt-below", FittedStatic)
        below.update(Text("\n").join(lines))
        below.display = bool(lines)

    def finished(self, job: Hunt) -> None:
        found = len(job.findings)
        tail = " Enter on a finding loads its minimal configuration into the form." if found else ""
        self.query_one("#hunt-status", FittedStatic).hold(False)
        self.say(f"{progress_words(job, '')} ({job.tally_words()}). Ended: {job.end_words()}.{tail}")
        self.running(False)

    def running(self, running: bool) -> None:
        """Start while no hunt runs, Stop while one does."""
        self.query_one("#hunt-start", Button).disabled = running
        self.query_one("#hunt-stop", Button).disabled = not running
