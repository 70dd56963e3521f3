"""Accuracy: cuDNN's error against the fp32 reference, with torch's own beside it; for a
training step dQ, dK, dV the same way; for FP8 the scales used and the amax the kernel wrote."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ...engine.config import SdpaConfig
from ...engine.results import BackwardResult, ErrorMetrics, Fp8Scaling, RunResult
from ...report import sci

GRADIENTS = ("dQ", "dK", "dV")


def torch_dtype(config: SdpaConfig) -> str:
    """What torch's own SDPA ran in: torch has no FP8 attention, so FP8 inputs are dequantised to fp16."""
    return "fp16" if config.fp8 else config.dtype


def verdict(m: ErrorMetrics | None) -> Text:
    if m is None:
        return Text("not run", style="dim")
    if m.mismatched == 0 and m.nonfinite == 0:
        return Text("pass", style="bold green")
    return Text(f"FAIL ({m.mismatched}/{m.total})", style="bold red")


class GradientTable(DataTable):
    """dQ, dK, dV a row each: cuDNN's error against fp32 autograd beside torch's own backward's."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="none", **kwargs)
        self.add_columns("gradient", "atol", "cuDNN max abs", "max rel", "cuDNN", "torch max abs", "torch")

    def show_gradients(self, b: BackwardResult) -> None:
        self.clear()
        for name in GRADIENTS:
            mine, theirs = b.gradients.get(name), b.torch_gradients.get(name)
            atol = b.atol.get(name)
            self.add_row(
                name,
                "-" if atol is None else f"{atol:.3g}",
                sci(mine.max_abs if mine else None),
                sci(mine.max_rel if mine else None),
                verdict(mine),
                sci(theirs.max_abs if theirs else None),
                verdict(theirs),
            )


class AmaxTable(DataTable):
    """Each amax an FP8 graph wrote beside the reference's maximum: the next step's scales come from it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="none", **kwargs)
        self.add_columns("graph", "amax", "kernel wrote", "reference", "kernel / reference")

    def show_amax(self, scalings: dict[str, Fp8Scaling]) -> None:
        self.clear()
        for graph, fp8 in scalings.items():
            for name, value in fp8.amax.items():
                ref = fp8.reference_amax.get(name)
                ratio = f"{value / ref:.3f}" if ref else "-"
                self.add_row(graph, name, f"{value:.4g}", "-" if ref is None else f"{ref:.4g}", ratio)


class AccuracyPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        yield Static("", id="accuracy-head")
        table = DataTable(id="accuracy-table", cursor_type="none")
        table.add_columns("output", "max abs", "max rel", "mean abs", "non-finite", "verdict")
        yield table
        yield Static("", id="gradients-head", classes="section-head")
        yield GradientTable(id="gradients-table")
        yield Static("", id="fp8-head", classes="section-head")
        yield AmaxTable(id="fp8-table")

    def on_mount(self) -> None:
        self._show_section("gradients", False)
        self._show_section("fp8", False)

    def _show_section(self, name: str, shown: bool) -> None:
        self.query_one(f"#{name}-head").display = shown
        self.query_one(f"#{name}-table").display = shown

    def show(self, result: RunResult) -> None:
        self._show_forward(result)
        self._show_gradients(result.backward)
        scalings = {"forward": result.fp8, "backward": result.backward.fp8 if result.backward else None}
        self._show_fp8({graph: fp8 for graph, fp8 in scalings.items() if fp8 is not None})

    def _show_forward(self, result: RunResult) -> None:
        acc = result.accuracy
        table = self.query_one("#accuracy-table", DataTable)
        table.clear()
        head = self.query_one("#accuracy-head", Static)
        if acc is None:
            head.update("not checked")
            return
        head.update(
            f"reference: {acc.reference}, on {acc.device}\n"
            f"tolerance ({result.config.dtype}): atol {acc.atol:g}, rtol {acc.rtol:g}"
            + (f"\n{acc.note}" if acc.note else "")
        )
        self._row(table, "cuDNN", acc.cudnn)
        self._row(table, f"torch {torch_dtype(result.config)} SDPA", acc.torch_lowp)

    def _show_gradients(self, b: BackwardResult | None) -> None:
        self._show_section("gradients", b is not None)
        if b is None:
            return
        head = Text("gradients dQ, dK, dV", style="bold")
        if b.reference:
            head.append(
                f" against {b.reference}\ntolerance: rtol {b.rtol:g}, atol per gradient "
                "(a share of its max |reference|)"
            )
        else:
            head.append(": not checked")
        if b.torch_backend:
            head.append(f"\ntorch: {b.torch_backend}")
        if b.note:
            head.append(f"\n{b.note}", style="yellow")
        self.query_one("#gradients-head", Static).update(head)
        self.query_one("#gradients-table", GradientTable).show_gradients(b)

    def _show_fp8(self, scalings: dict[str, Fp8Scaling]) -> None:
        self._show_section("fp8", bool(scalings))
        if not scalings:
            return
        head = Text("FP8 scaling", style="bold")
        head.append(f"\n{next(iter(scalings.values())).recipe}", style="dim")
        for graph, fp8 in scalings.items():
            scales = "  ".join(f"{name} {value:.4g}" for name, value in fp8.scales.items())
            head.append(f"\n{graph} scales: {scales or '-'}")
        self.query_one("#fp8-head", Static).update(head)
        self.query_one("#fp8-table", AmaxTable).show_amax(scalings)

    @staticmethod
    def _row(table: DataTable, who: str, m: ErrorMetrics | None) -> None:
        if m is None:
            table.add_row(who, "-", "-", "-", "-", Text("not run", style="dim"))
            return
        table.add_row(who, sci(m.max_abs), sci(m.max_rel), sci(m.mean_abs), str(m.nonfinite), verdict(m))
