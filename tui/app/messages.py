"""Every message the dashboard passes around, declared in one place.

Engine events (tui.process.client) arrive on the engine client's thread; `post_message` is
thread safe, so each travels as an EngineMessage to the UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ..model.config import SdpaConfig
from ..model.options import RunOptions
from ..model.results import RunResult
from ..process.client import EngineEvent, EngineProgress


@dataclass
class EngineMessage(Message):
    """One event of the engine client (ready, progress, result, died), carried to the UI thread."""

    event: EngineEvent

    def can_replace(self, message: Message) -> bool:
        """Progress words not yet shown are moot once newer ones arrive."""
        return (
            isinstance(self.event, EngineProgress)
            and isinstance(message, EngineMessage)
            and isinstance(message.event, EngineProgress)
        )


@dataclass
class ConfigEdited(Message):
    """The form changed: `config` is None when some field does not validate (see `errors`).
    Carries the run options the form shows too (model/options.py's FORM_OPTIONS; the rest at their
    defaults), so handlers never have to query the form (which may be gone by the time a queued
    message is handled)."""

    config: SdpaConfig | None
    errors: dict[str, str]
    options: RunOptions

    def can_replace(self, message: Message) -> bool:
        """A newer reading of the form makes an unhandled older one moot."""
        return isinstance(message, ConfigEdited)


@dataclass
class SweepAsked(Message):
    """Start or Enter in the Sweep pane: its vary inputs as typed, the first first."""

    texts: tuple[str, ...]


@dataclass
class NearestChosen(Message):
    """Enter on a nearest working configuration in the Explain pane: the configuration explained,
    and the one a small edit away that works (the form takes the edit, and keeps the rest)."""

    explained: SdpaConfig
    nearest: SdpaConfig


@dataclass
class HistoryOpened(Message):
    """Enter on a run in the History pane: its result, read back, to show in the panes."""

    run_id: int
    result: RunResult


@dataclass
class SearchAsked(Message):
    """Start, or Enter in the budget, in the Search pane: the budget as typed (the app reads it)."""

    budget: str


@dataclass
class HuntAsked(Message):
    """Start, or Enter in an input, in the Hunt pane: its budget, seed and focus as typed."""

    budget: str
    seed: str
    focus: str


@dataclass
class HuntFindingChosen(Message):
    """Enter on a finding in the Hunt pane: its minimal configuration, for the form."""

    config: SdpaConfig


class SearchStopAsked(Message):
    """Cancel in the Search pane: stop the search at its next candidate, keeping what it found."""


@dataclass
class BestPinned(Message):
    """Pin best in the Search pane: the best found's plan for the form's pinned plan, and the
    configuration it was found for (the form may have moved on since)."""

    plan: str
    searched: SdpaConfig
