"""The Hunt pane, in one dashboard start (dashboard starts are dear): a bad input said at its field;
a hunt through the app's engine client finding the planted classes once each, as they come, while
the form's edits wait; Esc stopping it while a run is under way, keeping them; their bundles written; Enter on a finding
putting its minimal configuration into the form, which then runs it; Start and Stop, clicked."""

from __future__ import annotations

import pytest
from fakes import FakeEngine
from hunt_fakes import answering, gqa_wrong_backward_nan
from pilot_waits import click, show_pane, wait_for
from textual.widgets import Input

from tui.app import make_app
from tui.model.config import SdpaConfig


async def under_way(pilot, fake: FakeEngine) -> None:
    """The hunt's next run held under way, as a real one takes its time: a key or a click then
    reaches an app that is waiting on the engine, not one that draws from a fake that answers at
    once (the pilot waits up to a second for a busy app to fall idle after each)."""
    fake.hold()
    await wait_for(pilot, lambda: fake.holding)


@pytest.mark.asyncio
async def test_a_hunt_from_the_pane_finds_stops_and_loads_a_finding():
    fake = FakeEngine(answering(gqa_wrong_backward_nan))
    app = make_app(SdpaConfig(), client=fake)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.result is not None and not fake.busy)
            await show_pane(pilot, "hunt")
            pane = app.query_one("#hunt")
            app.query_one("#hunt-focus", Input).value = "gqa,nope"
            app.query_one("#hunt-seed", Input).value = "5"
            app.query_one("#hunt-seed", Input).focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.query_one("#hunt-error").display)
            assert "focus: unknown focus nope" in str(app.query_one("#hunt-error").render())  # bad input
            assert app.query_one("#hunt-focus").has_class("-invalid") and not app.hunts.running
            app.query_one("#hunt-focus", Input).value = "gqa"
            fake.hold()  # Enter comes back once the first run is under way
            await pilot.press("enter")
            fake.release()
            await wait_for(pilot, lambda: len(pane.findings) == 2)  # both classes, as they came
            assert app.hunts.running and "configurations" in str(app.query_one("#hunt-status").render())
            assert app.query_one("#hunt-start").disabled and not app.query_one("#hunt-stop").disabled
            await under_way(pilot, fake)
            await pilot.press("escape")  # stop: no more draws
            fake.release()
            await wait_for(pilot, lambda: not app.hunts.running)
            ended = str(app.query_one("#hunt-status").render())
            assert "Ended: stopped when asked" in ended
            drawn = ended.split("Ended")[0]  # what the draws came to, counted by outcome
            assert " mismatch" in drawn and " non-finite output" in drawn
            await wait_for(pilot, lambda: any(n.title == "Hunt" for n in app._notifications))  # the bundles
            table = app.query_one("#hunt-table")
            table.focus()
            mismatch = next(f for f in pane.findings.values() if f.shrunk.failure.kind == "mismatch")
            table.move_cursor(row=table.get_row_index(str(mismatch.number)))
            await pilot.press("enter")  # its minimal configuration into the form, which runs it
            await wait_for(pilot, lambda: app.form.read()[0] == mismatch.shrunk.minimal)
            await wait_for(pilot, lambda: fake.requests[-1][0] == mismatch.shrunk.minimal and not fake.busy)
            assert not app.query_one("#hunt-start").disabled and app.query_one("#hunt-stop").disabled
            fake.hold()  # the new hunt's first run is under way when Stop is clicked
            await click(pilot, "#hunt-start")  # a hunt again, by its buttons
            await wait_for(pilot, lambda: app.hunts.running)
            await under_way(pilot, fake)
            await click(pilot, "#hunt-stop")
            fake.release()
            await wait_for(pilot, lambda: not app.hunts.running)
            assert "Ended: stopped when asked" in str(app.query_one("#hunt-status").render())
    finally:
        fake.close()
