"""Every message the dashboard passes around, declared in one place.

Engine events (tui.engine.process) arrive on the engine client's thread; `post_message` is
thread safe, so each travels as an EngineMessage to the UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ..engine.config import SdpaConfig
from ..engine.process import EngineEvent, EngineProgress


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
    Carries the timing switches too, so handlers never have to query the form (which may be
    gone by the time a queued message is handled)."""

    config: SdpaConfig | None
    errors: dict[str, str]
    l2_flush: bool
    autotune: bool

    def can_replace(self, message: Message) -> bool:
        """A newer reading of the form makes an unhandled older one moot."""
        return isinstance(message, ConfigEdited)
