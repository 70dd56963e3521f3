"""How far a sweep is: kept by the app while the points run (app/sweeping.py), said by the Sweep
pane and, shorter, by the status line."""

from __future__ import annotations

import time
from dataclasses import dataclass

clock = time.monotonic  # a test holds it still, so that elapsed times read the same each run
IDLE_WORDS = (
    "Give one or two varies (FIELD=VALUES, as sweep --vary takes them) and press Start or Enter: "
    "the form's configuration and timing run at every point, one at a time."
)


def elapsed_words(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


@dataclass(frozen=True)
class Progress:
    """How far a sweep is, as the pane's status line says it (the app's line says it shorter)."""

    total: int = 0
    done: int = 0
    running: str = ""  # the varied values of the point under way
    step: str = ""  # the engine's words for what it does on that point
    waiting: bool = False  # for the form's own run to finish first
    stopping: bool = False  # Esc: after the point under way
    started: float = 0.0
    ended: float | None = None
    finished: str = ""  # how it ended: "done", "stopped" and why

    @property
    def active(self) -> bool:
        return self.total > 0 and not self.finished

    def words(self) -> str:
        if not self.total:
            return IDLE_WORDS
        took = elapsed_words((self.ended if self.ended is not None else clock()) - self.started)
        if self.finished:
            return f"{self.finished}: {self.done} of {self.total} points in {took}"
        head = f"{self.done} of {self.total} points done, {took}"
        if self.waiting:
            return f"{head}; waiting for the form's own run to finish"
        step = f" ({self.step})" if self.step else ""
        if self.stopping:
            return f"{head}; stopping after {self.running}{step}: Esc again stops it now"
        return (
            f"{head}; running {self.running}{step}; form edits wait for the end, Esc stops after this point"
        )

    def short(self) -> str:
        """The app's status line: the sweep, and what happens to an edit meanwhile."""
        now = "stopping" if self.stopping else f"running {self.running}" if self.running else "waiting"
        return f"sweep {self.done} of {self.total} done, {now}: form edits wait for its end (Esc stops it)"
