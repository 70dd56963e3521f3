"""Every message the dashboard passes around, declared in one place.

Engine events arrive on the engine client's reader thread; `post_message` is thread
safe, so they become these messages and are handled on the UI thread.
"""

from __future__ import annotations

from textual.message import Message

from ..engine.config import SdpaConfig
from ..engine.results import Environment, RunResult


class EngineReady(Message):
    def __init__(self, environment: Environment, startup_seconds: float) -> None:
        super().__init__()
        self.environment = environment
        self.startup_seconds = startup_seconds


class EngineProgress(Message):
    def __init__(self, request_id: int, text: str) -> None:
        super().__init__()
        self.request_id = request_id
        self.text = text


class ResultReady(Message):
    def __init__(self, request_id: int, result: RunResult) -> None:
        super().__init__()
        self.request_id = request_id
        self.result = result


class EngineDied(Message):
    def __init__(self, reason: str, request_id: int | None) -> None:
        super().__init__()
        self.reason = reason
        self.request_id = request_id


class ConfigEdited(Message):
    """The form changed: `config` is None when some field does not validate (see `errors`)."""

    def __init__(self, config: SdpaConfig | None, errors: dict[str, str]) -> None:
        super().__init__()
        self.config = config
        self.errors = errors
