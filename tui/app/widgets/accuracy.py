"""Accuracy: each output of each pass against the fp32 reference, cuDNN's error with each
peer's beside it (torch's SDPA forced to a named backend that is not cuDNN, on the same inputs); for FP8 the scales each graph read and
the amax it wrote beside the reference's maximum."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...model.results import ErrorMetrics, Fp8Scaling, PassResult, RunResult
from ...present.format import sci, verdict_words
from .fitted import FittedStatic, FittedTable, FittingTable


def verdict(m: ErrorMetrics | None) -> Text:
    style = "dim" if m is None else ("bold green" if m.passed else "bold red")
    return Text(verdict_words(m), style=style)


class ChecksTable(FittingTable):
    """A row for cuDNN and each peer, for every output of every pass, under one tolerance an output;
    a narrow pane keeps the max abs error and the verdict, its other columns going in turn."""

    DROPS = ("mean abs", "non-finite", "atol", "max rel", "pass")

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="none", **kwargs)
        self.add_columns(
            "pass", "output", "by", "atol", "max abs", "max rel", "mean abs", "non-finite", "verdict"
        )

    def show_checks(self, passes: tuple[PassResult, ...]) -> None:
        self.clear()
        for p in passes:
            for c in p.checks:
                for i, (who, m) in enumerate([("cuDNN", c.cudnn), *c.peers.items()]):
                    first = i == 0
                    cells = (
                        (sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs), str(m.nonfinite))
                        if m
                        else ("-",) * 4
                    )
                    self.add_row(p.kind if first else "", c.output if first else "", who,
                                 f"{c.atol:.3g}" if first else "", *cells, verdict(m))  # fmt: skip


class AmaxTable(FittedTable):
    """Each amax an FP8 graph wrote beside the reference's maximum: the next step's scales come from it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="none", **kwargs)
        self.add_columns("pass", "amax", "kernel wrote", "reference", "kernel / reference")

    def show_amax(self, scalings: dict[str, Fp8Scaling]) -> None:
        self.clear()
        for kind, fp8 in scalings.items():
            for name, value in fp8.amax.items():
                ref = fp8.reference_amax.get(name)
                ratio = f"{value / ref:.3f}" if ref else "-"
                self.add_row(kind, name, f"{value:.4g}", "-" if ref is None else f"{ref:.4g}", ratio)


def checks_head(result: RunResult) -> Text:
    """How each pass was checked: the reference, where it ran, the rtol, the peers, the notes."""
    head = Text()
    for p in result.passes:
        if head:
            head.append("\n")
        head.append(f"{p.kind}: ", style="bold")
        if not p.checks:
            head.append("not checked")
        else:
            rtols = sorted({c.rtol for c in p.checks})
            head.append(
                f"against {p.reference}, on {p.check_device}; rtol {', '.join(f'{r:g}' for r in rtols)}"
            )
        for name, what in p.peers.items():
            head.append(f"\n  {name}: {what}", style="dim")
        for note in p.notes:
            head.append(f"\n  {note}", style="yellow")
    return head if head else Text("not checked")


class AccuracyPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        yield FittedStatic("", id="accuracy-head")
        yield ChecksTable(id="accuracy-table")
        yield FittedStatic("", id="fp8-head", classes="section-head")
        yield AmaxTable(id="fp8-table")

    def on_mount(self) -> None:
        self._show_fp8_section(False)

    def _show_fp8_section(self, shown: bool) -> None:
        self.query_one("#fp8-head").display = shown
        self.query_one("#fp8-table").display = shown

    def show(self, result: RunResult) -> None:
        self.query_one("#accuracy-head", Static).update(checks_head(result))
        self.query_one("#accuracy-table", ChecksTable).show_checks(result.passes)
        self._show_fp8({p.kind: p.fp8 for p in result.passes if p.fp8 is not None})

    def _show_fp8(self, scalings: dict[str, Fp8Scaling]) -> None:
        self._show_fp8_section(bool(scalings))
        if not scalings:
            return
        head = Text("FP8 scaling", style="bold")
        head.append(f"\n{next(iter(scalings.values())).recipe}", style="dim")
        for kind, fp8 in scalings.items():
            scales = "  ".join(f"{name} {value:.4g}" for name, value in fp8.scales.items())
            head.append(f"\n{kind} scales: {scales or '-'}")
        self.query_one("#fp8-head", Static).update(head)
        self.query_one("#fp8-table", AmaxTable).show_amax(scalings)
