"""The dashboard in the hand: each pane one key away (Alt+digit, F6 between the form and the panes,
the palette), stale results that cannot be mistaken for current ones (a badge, grey verdicts,
also after a run lost with a crash), ticks readable without colour, a help screen that starts
with the app's keys, and empty panes that say why.

A dashboard start is most of such a test's time: the checks that need the same app (the same
engine, the same size) share one start, in turn, and each says which it is when it fails."""

from __future__ import annotations

from textual._compositor import Compositor
from textual.widgets import TabbedContent, Tabs
from textual.widgets._footer import FooterKey

from tests.fakes import NO_GPU, RECORDED, FakeEngine, crash, relabelled
from tests.pilot_waits import show_pane, wait_for
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


async def test_without_a_gpu_the_latency_pane_says_why_it_is_empty():
    from tests.fakes import computed
    from tui.engine.runner import Engine

    app = make_app(SMALL, client=FakeEngine(computed(Engine(environment=NO_GPU)), environment=NO_GPU))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        await show_pane(pilot, "latency")
        (words,) = (t.plain for t in app.query_one("#latency-gpu").content.renderables)
        assert "no kernel times: there is no usable GPU here (CPU mode requested by the test)" in words
        assert headline(app).startswith("CPU ONLY  b1 h2")  # the verdict first: 80 columns never split it


async def test_focus_moves_repaint_little_keep_the_footer_and_alt_digits_reach_the_panes_or_a_dialog(
    monkeypatch,
):
    """One start without an engine, the checks of what were these tests, in turn:
    - test_a_focus_move_repaints_the_fields_it_changes_not_the_whole_screen;
    - test_a_tab_between_fields_keeps_the_footer_and_a_pane_with_keys_of_its_own_redraws_it:
      moving focus between fields whose keys are the same rebuilds nothing (a Tab used to rebuild
      every key and lay the screen out again); focus that brings keys of its own does;
    - test_alt_digit_as_most_terminals_send_it_reaches_the_panes_and_is_typed_in_a_dialog: xterm,
      GNOME Terminal and tmux send Alt+3 as ESC 3, which Textual reads as "£" (macOS's Option+3):
      in a field of the main screen it shows a pane, never lands in the field; in the save-preset
      dialog it is typed (a name or description may hold a "£"). The keys go in as the terminal's
      driver posts them, with their characters."""
    from textual import events
    from textual.keys import _character_to_key

    app = make_app(SMALL, start_engine=False)
    full: list[int] = []
    whole = Compositor.render_full_update

    def counted(compositor, *args, **kwargs):
        full.append(1)
        return whole(compositor, *args, **kwargs)

    def sent(char: str) -> None:
        app.post_message(events.Key(_character_to_key(char), char))

    async with app.run_test(size=(120, 40)) as pilot:
        # a focus move repaints the fields it changes, not the whole screen
        await wait_for(pilot, lambda: app.query_one("#f-b").has_focus)
        await pilot.pause()
        footer = app.query_one(KeysFooter)
        await wait_for(pilot, lambda: len(footer.query(FooterKey)) > 0)
        drawn = list(footer.query(FooterKey))
        monkeypatch.setattr(Compositor, "render_full_update", counted)
        for field in ("#f-h_q", "#f-s_q", "#f-b"):
            app.query_one(field).focus()
            await wait_for(pilot, lambda field=field: app.query_one(field).has_focus)
        assert full == [], "a focus move between fields repainted the whole screen"
        monkeypatch.setattr(Compositor, "render_full_update", whole)

        # a Tab between fields keeps the footer; a pane with keys of its own redraws it
        assert list(footer.query(FooterKey)) == drawn and all(key.is_attached for key in drawn), (
            "a focus move between fields rebuilt the footer"
        )
        await pilot.press("f3")
        app.query_one("#search-table").focus()
        await wait_for(pilot, lambda: "Pin best" in keys_of(footer))
        app.query_one("#f-b").focus()
        await wait_for(pilot, lambda: "Pin best" not in keys_of(footer))
        assert keys_of(footer) == [key.description for key in drawn], "the form's keys again"

        # Alt+digit as most terminals send it reaches the panes, and is typed in a dialog
        field = app.query_one("#f-b")
        field.focus()
        tabs = app.query_one(TabbedContent)
        for char, pane in (("£", "tab-phases"), ("™", "tab-peers"), ("ª", "tab-sweep")):
            sent(char)
            await wait_for(pilot, lambda pane=pane: tabs.active == pane)
        assert field.value == "1" and app.focused is field, "an Alt+digit landed in the field"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(app.screen.query("#save-name")))
        sent("£")
        await wait_for(pilot, lambda: app.screen.query_one("#save-name").value == "£")
        assert tabs.active == "tab-sweep", "the dialog's key was typed, no pane moved"
