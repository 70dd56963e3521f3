"""Waiting for the dashboard: on the state a test expects, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable

DEADLINE_S = 60.0  # generous: a busy 2-core machine may be slow, a wrong state never arrives


async def wait_for(pilot, predicate: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for the dashboard; status: {status_text(pilot.app)}")
        await pilot.pause()  # until the app has handled what arrived (not a fixed time), then look again


def status_text(app) -> str:
    return str(app.query_one("#status").render())
