"""Waiting for the dashboard: on the state a test expects, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual._wait import wait_for_idle
from textual.css.query import NoMatches

DEADLINE_S = 60.0  # generous: a busy 2-core machine may be slow, a wrong state never arrives
LOOK_S = 0.1  # the longest wait between looks while the app stays busy (a job drawing from a fake)


async def wait_for(pilot, predicate: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    """Return once `predicate` holds on a settled screen. Between looks the test only waits for the
    process to fall idle (what Pilot.pause waits for too, without its walk of every widget and
    repaint: those cost 30 ms of CPU a look, seconds while an engine starts), or for LOOK_S where
    it stays busy (Textual's own wait gives up only after a second); once the predicate holds, one
    full pause settles the screen and it is looked at again."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for the dashboard; status: {status_text(pilot.app)}")
        await wait_for_idle(0, LOOK_S)  # until the app has handled what arrived (not a fixed time)
        if predicate():
            await pilot.pause()  # every widget has handled its messages, the screen is drawn: look again


def status_text(app) -> str:
    return str(app.query_one("#status").render())


async def show_pane(pilot, name: str) -> None:
    """Show the pane `name` by its key, as a user does, once it is made and drawn: a pane is
    mounted the first time it is shown, and draws the app's state while on screen."""
    from tui.app.navigation import pane_key
    from tui.app.panes import TABS

    app, tab = pilot.app, f"tab-{name}"
    await pilot.press(pane_key([t.id for t in TABS].index(tab)).lower())
    await wait_for(pilot, lambda: app.query_one("#tabs").active == tab and app.pane(name) is not None)


async def click(pilot, selector: str) -> None:
    """Click a widget of the screen on show once it is laid out where it will be seen (a widget
    just shown may not have its place yet, and a click at no place lands on whatever is at the
    screen's corner)."""
    app = pilot.app

    def placed() -> bool:
        try:
            widget = app.screen.query_one(selector)
        except NoMatches:  # not shown yet (a dialog still opening)
            return False
        if not widget.region:
            return False
        under, _ = app.screen.get_widget_at(*widget.region.offset)
        return under is widget or widget in under.ancestors

    await wait_for(pilot, placed)
    await pilot.click(selector)


async def swept_with_every_peer(pilot, fake, vary: str = "s=1024..8192x2") -> None:
    """Every peer ticked and the first run answered, then the Sweep pane's sweep over `vary` run to
    its end (the Sweep pane's snapshot and its fit test)."""
    from textual.widgets import Input

    from tui.engine.peers import PEER_KEYS

    app = pilot.app
    await wait_for(pilot, lambda: app.result is not None and not fake.busy)
    app.set_peers(PEER_KEYS)
    await wait_for(pilot, lambda: len(fake.requests) == 2 and not fake.busy and not app.run_pending)
    await pilot.press("alt+9")
    app.query_one("#sweep-vary-1", Input).focus()
    await pilot.press(*vary, "enter")
    await wait_for(pilot, lambda: bool(app.query_one("#sweep").progress.finished))
