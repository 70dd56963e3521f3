"""The dashboard in the hand: each pane one key away (Alt+digit, F6 between the form and the panes,
the palette), stale results that cannot be mistaken for current ones (a badge, grey verdicts,
also after a run lost with a crash), ticks readable without colour, a help screen that starts
with the app's keys, and empty panes that say why.

A dashboard start is most of such a test's time: the checks that need the same app (the same
engine, the same size) share one start, in turn, and each says which it is when it fails. Those
of the form without an engine run in test_app.py's shared form app, and the Latency pane of a
CPU result is read in test_app.py's run of the CPU engine."""

from __future__ import annotations

from textual.widgets import TabbedContent, Tabs
from textual.widgets._footer import FooterKey

from tests.fakes import RECORDED, FakeEngine, crash, relabelled
from tests.pilot_waits import wait_for
from tui.app import make_app
from tui.app.widgets.config_form import Tick
from tui.app.widgets.keys import KeysFooter
from tui.model.config import SdpaConfig

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


def headline(app) -> str:
    return str(app.query_one("#summary").render())


def keys_of(footer) -> list[str]:
    return [key.description for key in footer.query(FooterKey)]


async def test_the_footer_panes_by_key_stale_results_ticks_the_help_and_esc_with_a_result():
    """One start with a result, the checks of what were these tests, in turn:
    - test_the_footer_lists_the_apps_keys_in_its_order_wherever_the_focus_is: an Input's own
      Ctrl+E ("end") put Export first while a field had focus and fifth from a table: the keys
      moved, and the footer was rebuilt, at each move between the form and a pane;
    - test_panes_by_key_from_a_field_and_back_and_stale_is_unmistakable;
    - test_ticks_help_palette_and_empty_panes_say_what_they_mean."""
    fake = FakeEngine(relabelled(RECORDED))
    app = make_app(SMALL, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)

        # the footer lists the app's keys in its order wherever the focus is
        footer = app.query_one(KeysFooter)
        words = ["Run again", "Presets", "Save preset", "Export", "Help", "Quit", "Panes", "Form/panes"]
        app.query_one("#f-b").focus()
        await wait_for(pilot, lambda: keys_of(footer)[:-1] == words)
        drawn = list(footer.query(FooterKey))
        app.query_one("#plans-forward").focus()
        await wait_for(pilot, lambda: app.query_one("#plans-forward").has_focus)
        assert list(footer.query(FooterKey)) == drawn, (
            "from a table: the same keys, in place, nothing rebuilt"
        )

        # panes by key from a field and back
        app.query_one("#f-b").focus()
        tabs = app.query_one(TabbedContent)
        keys = (
            ("alt+4", "tab-accuracy"),
            ("alt+8", "tab-graph"),
            ("alt+2", "tab-peers"),
            ("alt+1", "tab-plans"),
        )
        for key, pane in keys:
            await pilot.press(key)  # a field has focus: the keys still reach the app
            await wait_for(pilot, lambda pane=pane: tabs.active == pane)
        await pilot.press("f6")
        await wait_for(
            pilot, lambda: app.focused is not None and app.query_one("#form") not in app.focused.ancestors
        )
        assert app.focused.id.startswith("plans"), "F6: the forward's table in the pane on show"
        await pilot.press("f6")
        await wait_for(
            pilot, lambda: app.focused is not None and app.focused.id == "f-b"
        )  # back where it was

        # stale is unmistakable
        assert "STALE" not in headline(app) and "PASS" in headline(app)
        app.query_one("#f-b").value = "0"  # a field that does not validate
        await wait_for(pilot, lambda: "STALE" in headline(app))
        assert headline(app).startswith(" STALE  not the form's configuration")
        columns = [str(c.label) for c in app.query_one("#plans-forward").columns.values()]
        assert columns[:6] == ["#", "", "plan", "kernel", "TFLOPS", "max err"]  # what 80 columns show
        assert "not run: fix batch (b)" in str(app.query_one("#status").render())  # the form's words
        app.query_one("#f-b").value = "1"
        await wait_for(pilot, lambda: "STALE" not in headline(app))

        fake.then(crash())  # the run for an edit dies with the engine: the panes are behind the form
        app.query_one("#f-b").value = "2"
        await wait_for(pilot, lambda: "STALE" in headline(app))
        assert app.query_one("#right").has_class("-stale") and app.result.config == SMALL, "after a crash"
        assert "the panes show an earlier configuration (stale)" in str(app.query_one("#status").render())
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.result.config.b == 2 and "STALE" not in headline(app))

        # ticks readable without colour
        autotune, flush = app.query_one("#f-autotune", Tick), app.query_one("#f-l2_flush", Tick)
        assert autotune.value and "✓" in str(autotune.render()) and "✓" not in str(flush.render()), "ticks"

        # the help starts with the app's keys; Esc closes it and stops nothing
        await pilot.press("f1")
        await wait_for(pilot, lambda: app.screen.id != "_default" and bool(app.screen.query("Markdown")))
        text = app.screen.query_one("Markdown").source
        assert (
            text.index("Esc, F1 or q closes this help")
            < text.index("## Keys")
            < text.index("## Without a GPU")
        )
        assert text.index("| Alt+1 … Alt+9 | show a pane: Plans, Peers, Phases,") < text.index("## Panes")
        await pilot.press("escape")  # closes the help, and stops nothing
        await wait_for(pilot, lambda: not app.screen.query("Markdown"))
        assert fake._cancelled == set(), "Esc closing the help stopped a run"

        fake.hold()  # a run under way: Esc stops it at its next step; the panes keep what they had
        app.query_one("#f-b").value = "3"
        await wait_for(
            pilot, lambda: fake.busy and "timing plan 1 of 1" in str(app.query_one("#status").render())
        )
        shown = app.result
        await pilot.press("escape")
        fake.release()
        await wait_for(pilot, lambda: "Ctrl+R runs it again" in str(app.query_one("#status").render()))
        assert app.result is shown and "stopped while timing plan 1 of 1: asked to stop" in str(
            app.query_one("#status").render()
        )
        assert "STALE" in headline(app), "the form asks for b=3, the panes show b=2"

        from tui.app.commands import ExplorerCommands

        names = [name for name, _, _ in ExplorerCommands(app.screen)._commands()]
        assert {"Pane: Peers", "Pane: Graph", "Peers: tick all", "Dtype: fp8_e4m3", "Layout: SBHD"} <= set(
            names
        ), "the palette's commands"

        await pilot.resize_terminal(
            80, 24
        )  # the tab bar is narrower than its tabs: it scrolls to the one shown
        await pilot.press("alt+8")
        bar = app.query_one(TabbedContent).query_one(Tabs)
        graph = bar.query_one("#--content-tab-tab-graph")
        await wait_for(pilot, lambda: bar.region.contains_region(graph.region))
