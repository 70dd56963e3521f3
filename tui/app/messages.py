"""Every message the dashboard passes around, declared in one place.

Engine events (tui.engine.process) arrive on the engine client's reader thread;
`post_message` is thread safe, so each travels as an EngineMessage to the UI thread.
"""

from __future__ import annotations

from textual.message import Message

from ..engine.config import SdpaConfig
from ..engine.process import EngineEvent


class EngineMessage(Message):
    """One event of the engine client (ready, progress, result, died), carried to the UI thread."""

    def __init__(self, event: EngineEvent) -> None:
        super().__init__()
        self.event = event


class ConfigEdited(Message):
    """The form changed: `config` is None when some field does not validate (see `errors`).
    Carries the timing switches too, so handlers never have to query the form (which may be
    gone by the time a queued message is handled)."""

    def __init__(
        self, config: SdpaConfig | None, errors: dict[str, str], l2_flush: bool, autotune: bool
    ) -> None:
        super().__init__()
        self.config = config
        self.errors = errors
        self.l2_flush = l2_flush
        self.autotune = autotune
