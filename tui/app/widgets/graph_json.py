"""Graph: each pass's graph as cuDNN describes it (its JSON), for the curious and for bug
reports; one below the other, since cuDNN builds each pass's graph separately."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...model.results import RunResult
from ...model.statuses import PASS_KINDS
from .fitted import FittedStatic
from .sections import show_passes


def json_view(graph_json: str) -> Syntax | str:
    return Syntax(graph_json, "json", theme="ansi_dark", word_wrap=True) if graph_json else "no graph"


class GraphPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        for kind in PASS_KINDS:
            yield FittedStatic(f"{kind} graph", id=f"graph-{kind}-head", classes="pass-head")
            yield FittedStatic("no graph yet", id=f"graph-{kind}")

    def on_mount(self) -> None:
        show_passes(self, "graph", ())

    def show(self, result: RunResult) -> None:
        show_passes(self, "graph", tuple(p.kind for p in result.passes))
        for p in result.passes:
            self.query_one(f"#graph-{p.kind}", Static).update(json_view(p.graph_json))
        if not result.passes:
            self.query_one(f"#graph-{PASS_KINDS[0]}", Static).update("no graph")
