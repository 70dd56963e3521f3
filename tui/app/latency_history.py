"""Each pass's kernel time of every GPU run since the app started: the app's state that the
Latency pane draws (kept without the pane, which is made the first time it is shown)."""

from __future__ import annotations

from ..model.results import RunResult


class LatencyHistory:
    """Each pass's kernel time of every GPU run since the app started: kept by the app as each
    result arrives, so the pane draws every run when it is shown, hidden meanwhile or not."""

    def __init__(self) -> None:
        self.runs = 0  # GPU runs since the app started
        self.points: dict[str, list[tuple[int, float]]] = {}  # pass kind -> (run, kernel µs) of each

    def add(self, result: RunResult) -> None:
        timed = [p for p in result.passes if p.timing is not None]
        if timed:
            self.runs += 1
            for p in timed:
                self.points.setdefault(p.kind, []).append((self.runs, p.timing.median_us))
