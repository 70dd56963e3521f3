"""A sweep under way, as both the CLI's `sweep` and the dashboard's Sweep pane run it: its points
handed out one at a time (to one engine, or to one engine a GPU, each taking the next as it
finishes one), each answer made a row (sweep.py's point_row; a point lost with its engine process is
answered by process/session.py's died_result), and a stop that lets the points under way
finish."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..model.options import RunOptions
from ..model.results import RunResult
from .sweep import Point, point_row


class SweepRun:
    """The points of one sweep and the rows of those answered; safe to share between threads."""

    def __init__(self, points: list[Point], options: RunOptions) -> None:
        self.points = list(points)
        self.options = options
        self.rows: list[dict] = []
        self.stopping = False  # no point is handed out any more; those under way finish
        self._taken = 0
        self._lock = threading.Lock()

    def take(self) -> Point | None:
        """The next point to run; None once every point is handed out or the sweep stops."""
        with self._lock:
            if self.stopping or self._taken == len(self.points):
                return None
            self._taken += 1
            return self.points[self._taken - 1]

    def answered(self, point: Point, result: RunResult, keep: Callable[[dict], None] | None = None) -> dict:
        """A point's answer as its row, kept in the order the answers came; `keep` (the row
        written to a file) goes first, and a row it could not keep (it raised) is not counted."""
        row = point_row(point, result)
        if keep is not None:
            keep(row)
        with self._lock:
            self.rows.append(row)
        return row

    def stop(self) -> None:
        self.stopping = True

    @property
    def handed_out(self) -> int:
        return self._taken

    @property
    def all_handed_out(self) -> bool:
        return self._taken == len(self.points)
