"""The status line: what is running now, and the last error."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusLine(Static):
    def set(self, now: str, error: str = "") -> None:
        t = Text(now)
        if error:
            t.append("   " + error, style="bold red")
        self.update(t)
