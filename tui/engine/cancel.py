"""A stop between steps: what a progress report raises when a run is no longer wanted, and the
check a long computation makes between its chunks (the CPU reference and peer, the drawn inputs),
so that a cancel stops it within one chunk rather than at its next step."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar


class Cancelled(BaseException):  # noqa: N818 - a stop, not an error: `except Exception` lets it pass
    """Raised by a progress report, between steps, to stop a run that is no longer wanted."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


# the check of the request under way (the engine process's: is a cancel or a newer request
# waiting?); None outside one, and in any other thread (the engine's warm-up), which never stops
_check: ContextVar[Callable[[], None] | None] = ContextVar("sdpa_cancel_check", default=None)


def between_chunks() -> None:
    """Raise Cancelled here if the run under way is no longer wanted (its check, set by
    `checking`, says so); nothing outside a run."""
    check = _check.get()
    if check is not None:
        check()


@contextlib.contextmanager
def checking(check: Callable[[], None]) -> Iterator[None]:
    """Have `between_chunks` call `check` (which raises Cancelled to stop) while the block runs."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)
