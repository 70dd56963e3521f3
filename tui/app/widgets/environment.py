"""Environment: the GPU and the versions the engine process sees, or why there is no GPU."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from ...engine.environment import describe
from ...engine.results import Environment


class EnvironmentPane(DataTable):
    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.add_columns("what", "value")
        self.add_row("engine", "starting (loading torch and cuDNN in the engine process)")

    def show(self, env: Environment) -> None:
        self.clear()
        for key, value in describe(env):
            style = "bold yellow" if key == "GPU unavailable" else ""
            self.add_row(Text(key, style=style), Text(value or "-", style=style))
