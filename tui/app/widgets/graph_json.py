"""Graph: the graph as cuDNN describes it (its JSON), for the curious and for bug reports."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...engine.results import RunResult


class GraphPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        yield Static("no graph yet", id="graph-json")

    def show(self, result: RunResult) -> None:
        graph_json = result.graph_json
        body = Syntax(graph_json, "json", theme="ansi_dark", word_wrap=True) if graph_json else "no graph"
        self.query_one("#graph-json", Static).update(body)
