"""Graph: the graph as cuDNN describes it (its JSON), for the curious and for bug reports;
a training step's backward graph below the forward's, since cuDNN builds them separately."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...engine.results import RunResult


def json_view(graph_json: str) -> Syntax | str:
    return Syntax(graph_json, "json", theme="ansi_dark", word_wrap=True) if graph_json else "no graph"


class GraphPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        yield Static("no graph yet", id="graph-json")
        yield Static("backward graph (sdpa_backward: dQ, dK, dV)", id="backward-graph-title")
        yield Static("", id="backward-graph-json")

    def on_mount(self) -> None:
        self._show_backward(False)

    def _show_backward(self, shown: bool) -> None:
        self.query_one("#backward-graph-title").display = shown
        self.query_one("#backward-graph-json").display = shown

    def show(self, result: RunResult) -> None:
        self.query_one("#graph-json", Static).update(json_view(result.graph_json))
        b = result.backward
        self._show_backward(b is not None)
        if b is not None:
            self.query_one("#backward-graph-json", Static).update(json_view(b.graph_json))
