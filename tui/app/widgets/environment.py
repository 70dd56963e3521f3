"""Environment: the GPU and the versions the engine process sees, or why there is no GPU."""

from __future__ import annotations

from rich.text import Text

from ...engine.environment import describe
from ...model.results import Environment
from .fitted import FittedTable


class EnvironmentPane(FittedTable):
    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.add_columns("what", "value")
        self.add_row("engine", "starting (loading torch and cuDNN in the engine process)")

    def show(self, env: Environment, restarts: int = 0, last_restart: str = "") -> None:
        """The environment, and how often the engine process had to start afresh (and why, last)."""
        self.clear()
        for key, value in describe(env):
            style = "bold yellow" if key == "GPU unavailable" else ""
            self.add_row(Text(key, style=style), Text(value or "-", style=style))
        if restarts:
            words = f"{restarts} (last: {last_restart})" if last_restart else str(restarts)
            self.add_row(Text("engine restarts", style="bold yellow"), Text(words, style="bold yellow"))
