"""The tab panes are made the first time they are shown and drawn while they are shown: a start
styles the Plans pane only, a result is drawn into the pane on screen, and a pane hidden when
results came draws the newest (with every run in its history) when it is shown.

One dashboard start serves the checks that need the same app (a start is most of such a test's
time): each check says which it is when it fails."""

from __future__ import annotations

from textual.css.stylesheet import Stylesheet
from textual.screen import Screen
from textual.widget import Widget

from tests.fakes import RECORDED, FakeEngine, relabelled
from tests.pilot_waits import click, show_pane, wait_for
from tui.app import make_app
from tui.app.panes import TABS
from tui.app.widgets import PhasesPane
from tui.model.config import SdpaConfig

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


def made(app) -> list[str]:
    """The tabs whose pane exists."""
    return [tab.id for tab in TABS if app.query_one(f"#{tab.id}").children]


async def test_a_start_styles_and_lays_out_once_makes_each_pane_when_first_shown_and_draws_it_while_shown(
    monkeypatch,
):
    """One start, the checks of what were these tests, in turn:
    - test_a_start_styles_each_widget_about_once: the first screen's resume restyled every widget
      a second time (a third of a second of a start on two cores), and the hidden panes were
      styled with the rest;
    - test_a_start_lays_the_screen_out_once_and_a_new_size_lays_it_out_again: Textual laid the
      whole screen out at each resize it was told of, three times at start for the size it had just
      been laid out at; a terminal of another size is laid out anew (at the end, below);
    - test_a_pane_is_made_when_first_shown_and_draws_only_while_shown;
    - test_a_pane_key_pressed_in_a_table_shows_the_pane_and_takes_the_focus_along: hiding a pane
      whose table has focus made Textual hand the focus to the next table of that pane, which
      showed the pane again: Alt+3 from the plans table did nothing;
    - test_a_click_on_a_tab_and_the_palettes_call_each_make_and_draw_the_pane: a click switches
      the tab first (the pane is made after); the palette calls the pane key's action later, as an
      awaitable;
    - test_f6_from_the_form_reaches_the_input_of_the_sweep_and_search_panes_and_goes_back: a pane
      that scrolls is focusable itself: F6 goes past it to the first field inside;
    - the new size, laid out anew (the second half of the layout check)."""
    styled: list[Widget] = []
    apply = Stylesheet.apply

    def counted(sheet, node, *args, **kwargs):
        if isinstance(node, Widget):
            styled.append(node)
        return apply(sheet, node, *args, **kwargs)

    sizes = []
    refresh_layout = Screen._refresh_layout

    def laid_out(screen, size=None, scroll=False):
        sizes.append(screen.app.size)
        return refresh_layout(screen, size, scroll)

    drawn: list[object] = []  # the results the Phases pane was given, in order
    show = PhasesPane.show
    monkeypatch.setattr(Stylesheet, "apply", counted)
    monkeypatch.setattr(Screen, "_refresh_layout", laid_out)
    monkeypatch.setattr(PhasesPane, "show", lambda pane, result: (drawn.append(result), show(pane, result)))
    fake = FakeEngine(relabelled(RECORDED))
    app = make_app(SMALL, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        assert len(sizes) == 1, f"layouts at start (the first frame only): {sizes}"
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        widgets = len(list(app.screen.walk_children(with_self=True)))
        # each widget once as it mounts; a few again as focus, validity or a value change a class
        styled_at_start = len(styled)  # said at the end, so that the checks below run whatever it is
        monkeypatch.setattr(Stylesheet, "apply", apply)

        # a pane is made when first shown, and draws only while shown
        assert made(app) == ["tab-plans"] and drawn == [], "only the Plans pane is made at start"
        first = app.result
        await show_pane(pilot, "phases")
        assert made(app) == ["tab-plans", "tab-phases"] and drawn == [first], "Phases made when shown"
        assert app.query_one("#phases-forward").row_count == len(first.forward.phases)
        await show_pane(pilot, "plans")  # a result arrives while the Phases pane is hidden
        app.form.load(SMALL.replace(b=2))
        await wait_for(pilot, lambda: app.result.config.b == 2 and not fake.busy)
        assert drawn == [first], "a hidden pane is not drawn"
        await show_pane(pilot, "phases")
        assert drawn == [first, app.result], "the newest result, once, when shown"
        await show_pane(pilot, "plans")
        await show_pane(pilot, "phases")
        assert drawn == [first, app.result], "nothing new: not drawn again"
        await show_pane(pilot, "latency")  # made after two runs: both are in its history
        assert [run for run, _ in app.query_one("#latency").history["forward"]] == [1, 2]

        # a pane key pressed in a table shows the pane and takes the focus along
        await show_pane(pilot, "plans")
        app.query_one("#plans-forward").focus()
        await wait_for(pilot, lambda: app.query_one("#plans-forward").has_focus)
        await pilot.press("alt+3")
        await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-phases")
        assert app.focused is not None and app.query_one("#tab-phases") in app.focused.ancestors, (
            "Alt+3 from the plans table: the focus goes along to the Phases pane"
        )
        await pilot.press("alt+3")  # the key of the pane shown: the focus stays where it is
        focused = app.focused
        await pilot.pause()
        assert app.query_one("#tabs").active == "tab-phases" and app.focused is focused

        # a click on a tab, and the palette's call, each make and draw the pane
        assert "tab-graph" not in made(app)
        await click(pilot, "#--content-tab-tab-graph")
        await wait_for(pilot, lambda: "tab-graph" in made(app))
        graph = app.query_one("#graph-forward")
        await wait_for(pilot, lambda: getattr(graph.content, "code", "") == app.result.forward.graph_json)
        assert app.query_one("#tabs").active == "tab-graph", "a click on the tab shows its pane"
        assert "tab-accuracy" not in made(app)
        app.call_later(app.action_show_pane, [tab.id for tab in TABS].index("tab-accuracy"))
        await wait_for(
            pilot, lambda: app.query_one("#tabs").active == "tab-accuracy" and "tab-accuracy" in made(app)
        )
        assert app.query_one("#accuracy-table").row_count == 2, "the palette's call draws the pane"

        # F6 from the form reaches the input of the Sweep and Search panes, and goes back
        for tab, field in (("sweep", "#sweep-vary-1"), ("search", "#search-budget")):
            await show_pane(pilot, tab)
            app.query_one("#f-b").focus()
            await pilot.press("f6")
            await wait_for(pilot, lambda field=field: app.focused is app.query_one(field))
            await pilot.press(*"s=1")
            assert app.query_one(field).value.endswith("s=1"), f"F6 reached {field}"
            await pilot.press("f6")
            await wait_for(pilot, lambda: app.focused is app.query_one("#f-b"))
            assert app.query_one("#f-b").value == "2", "nothing typed reached the form"

        # a new size is laid out anew
        await pilot.resize_terminal(80, 24)
        form = app.query_one("#form")
        await wait_for(pilot, lambda: form.outer_size.width == 32)  # the narrow form of 80 columns
        assert sizes[-1] == (80, 24), f"the new size laid out: {sizes}"
    assert styled_at_start < 2 * widgets, (
        f"a start styles each widget about once: {styled_at_start}, {widgets}"
    )
