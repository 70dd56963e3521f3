"""Environment: the GPU and the versions the engine process sees, or why there is no GPU. A value
longer than the pane leaves it is written on as many lines as it takes, never cut at the edge."""

from __future__ import annotations

import textwrap

from rich.cells import cell_len
from rich.text import Text

from ...engine.environment import describe
from ...model.results import Environment
from .fitted import FittedTable


class EnvironmentPane(FittedTable):
    _shown: tuple[Environment, int, str] | None = None  # what show() was given, to wrap again at a new width
    _width = 0  # the width its values were wrapped to

    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.add_columns("what", "value")
        self.add_row("engine", "starting (loading torch and cuDNN in the engine process)")

    def show(self, env: Environment, restarts: int = 0, last_restart: str = "") -> None:
        """The environment, and how often the engine process had to start afresh (and why, last)."""
        self._shown = (env, restarts, last_restart)
        rows = [
            (key, value or "-", "bold yellow" if key == "GPU unavailable" else "")
            for key, value in describe(env)
        ]
        if restarts:
            words = f"{restarts} (last: {last_restart})" if last_restart else str(restarts)
            rows.append(("engine restarts", words, "bold yellow"))
        self._width = self.scrollable_content_region.width
        room = self._width - max(cell_len(key) for key, _, _ in rows) - 4 * self.cell_padding
        self.clear()
        for key, value, style in rows:
            lines = textwrap.wrap(value, room, break_on_hyphens=False) if room > 10 else [value]
            self.add_row(Text(key, style=style), Text("\n".join(lines), style=style), height=None)

    def on_resize(self) -> None:
        if self._shown is not None and self.scrollable_content_region.width != self._width:
            self.show(*self._shown)
