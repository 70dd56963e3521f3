"""A stop between steps: what a progress report raises when a run is no longer wanted."""

from __future__ import annotations


class Cancelled(BaseException):  # noqa: N818 - a stop, not an error: `except Exception` lets it pass
    """Raised by a progress report, between steps, to stop a run that is no longer wanted."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
