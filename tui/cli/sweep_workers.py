"""The sweep's points through its engines, a thread each taking the next point as it finishes
one: each row written whole and in turn, so that neither Ctrl+C nor a full disk leaves half a line
(tui.cli.sweep says what came of it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column

from ..jobs.sweep import varied_words
from ..jobs.sweep_run import SweepRun


def why(exc: OSError) -> str:
    """An OS error in the words a message repeats."""
    return exc.strerror or str(exc)


def _appender(sink):
    """A row appended to `sink` (a store.files.LineFile) as one JSON line."""
    return lambda row: sink.append(json.dumps(row) + "\n")


def _progress(console: Console) -> Progress:
    """The bar under the sweep: the point and the engine's step, done of all, time and ETA."""
    words = Column(ratio=1, no_wrap=True, overflow="ellipsis")  # the point and the engine's step
    return Progress(
        TextColumn("{task.description}", table_column=words), BarColumn(bar_width=24), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console, expand=True,
    )  # fmt: skip


class PointWorkers:
    """The engines' threads over one SweepRun: each finished point's row appended to `sink` and
    kept in the history by `remember`, one writer at a time and none once stopped; `down` says
    each engine that could not start, `unwritten` why `sink` could not take a row."""

    def __init__(self, run: SweepRun, sink: Any, console: Console, remember: Callable | None) -> None:
        self.run, self.sink, self.remember = run, sink, remember
        self.lock, self.stop, self.interrupted = threading.Lock(), threading.Event(), threading.Event()
        self.unwritten: list[str] = []
        self.down: list[str] = []
        self.progress = _progress(console)
        self.task = self.progress.add_task("starting", total=len(run.points))

    def keep(self, point, result) -> None:
        with self.lock:  # one writer at a time, and none once stopped: a line is whole, never mixed
            if self.stop.is_set():
                return
            try:
                self.run.answered(point, result, keep=None if self.sink is None else _appender(self.sink))
            except OSError as exc:  # a full disk: the line taken back, the sweep stopped
                self.unwritten.append(why(exc))
                self.stop.set()
                self.run.stop()
                return
            if self.remember is not None:
                self.remember(result)
            self.progress.advance(self.task)

    def work(self, open_session, name: str) -> None:
        """One engine's share: the next point while there is one and the sweep goes on."""
        try:
            with open_session() as session:
                if session.ready() is None:
                    self.down.append(f"{name}the engine process cannot start: {session.down}")
                    return
                while not self.stop.is_set() and (point := self.run.take()) is not None:
                    said = f"{name}{escape(varied_words(point.varied))}"
                    self.progress.update(self.task, description=said)

                    def watch(step: str, said: str = said) -> None:
                        self.progress.update(self.task, description=f"{said}: {escape(step)}")

                    self.keep(point, session.run(point.config, self.run.options, watch=watch))
        except KeyboardInterrupt:  # a stop said inside a worker (tests) is the user's Ctrl+C
            self._interrupt()

    def _interrupt(self) -> None:
        self.stop.set()
        self.run.stop()
        self.interrupted.set()

    def run_all(self, sessions: list[Callable], names: list[str]) -> None:
        """A thread an engine, waited on until every one ends or Ctrl+C stops the sweep; then
        `sink` closed, with no row half written."""
        workers = [
            threading.Thread(target=self.work, args=w, daemon=True) for w in zip(sessions, names, strict=True)
        ]
        try:
            with self.progress:
                for t in workers:
                    t.start()
                while any(t.is_alive() for t in workers):
                    for t in workers:
                        t.join(0.1)
        except KeyboardInterrupt:
            with self.lock:
                self.stop.set()
            self.run.stop()
            self.interrupted.set()
        finally:
            with self.lock:
                if self.sink is not None:
                    self.sink.close()
                    self.sink = None
