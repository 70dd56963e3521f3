"""The tab panes: each is made the first time it is shown, and drawn while it is shown.

Twelve panes styled, laid out and drawn at start, and each result drawn into all of them, were
half of the dashboard's start and most of what a result cost on screen. A pane is mounted the
first time its tab is shown, and stays; its module is imported then too. A pane that draws the
app's state (the form's result, its configuration's mask, the environment) is drawn when that
state changes while it is on screen, or when it is shown after the state moved on. The panes with
state of their own (Sweep, Explain, History, Search, Hunt) are driven by the app once they exist:
nothing reaches them before.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import NamedTuple

from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.widget import AwaitMount, Widget
from textual.widgets import TabbedContent, TabPane, Tabs

from .host import Host
from .pane_keys import first_field


class Tab(NamedTuple):
    """A tab and its pane's class, by name: the first screen imports only the Plans pane's module."""

    title: str
    module: str  # under tui.app.widgets
    kind: str  # the pane's class

    @property
    def name(self) -> str:
        """The pane's id."""
        return self.title.lower()

    @property
    def id(self) -> str:
        """The tab's id."""
        return f"tab-{self.name}"

    def pane_class(self) -> type[Widget]:
        return getattr(importlib.import_module(f"{__package__}.widgets.{self.module}"), self.kind)


# the tabs, in order (a new one goes last: Alt+digit keys stay; the tenth is Alt+0)
TABS = (
    Tab("Plans", "plans", "PlansPane"),
    Tab("Peers", "peers", "PeersPane"),
    Tab("Phases", "phases", "PhasesPane"),
    Tab("Accuracy", "accuracy", "AccuracyPane"),
    Tab("Latency", "latency", "LatencyPane"),
    Tab("Mask", "mask", "MaskPane"),
    Tab("Environment", "environment", "EnvironmentPane"),
    Tab("Graph", "graph_json", "GraphPane"),
    Tab("Sweep", "sweep", "SweepPane"),
    Tab("Explain", "explain", "ExplainPane"),
    Tab("History", "history", "HistoryPane"),  # the eleventh: F2 (and the palette)
    Tab("Search", "search", "SearchPane"),  # the twelfth: F3
    Tab("Hunt", "hunt", "HuntPane"),  # the thirteenth: F4
)
BY_ID = {tab.id: tab for tab in TABS}
INITIAL = TABS[0]
RESULT_PANES = ("plans", "peers", "phases", "accuracy", "latency", "graph")  # draw the form's result


class Panes:
    """The tabs and their panes, a part the app holds: a pane is mounted before anyone looks at it.

    The app keeps what the drawing panes show: `result`, `search_result`, `latency_history`,
    `mask_config` (the form's configuration and seed) and `environment` with `restarts`."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self._ready: dict[str, Widget] = {}  # by the pane's name
        self._drawn: dict[str, tuple] = {}
        self._mounting: dict[str, tuple[Widget, AwaitMount]] = {}

    def compose(self) -> ComposeResult:
        with TabbedContent(initial=INITIAL.id, id="tabs"):
            for tab in TABS:
                with TabPane(tab.title, id=tab.id):
                    if tab is INITIAL:
                        yield tab.pane_class()(id=tab.name)

    def pane(self, name: str) -> Widget | None:
        """The pane of this name (its tab's title in lower case) once it is mounted with its
        widgets, else None."""
        found = self._ready.get(name)
        if found is None and name == INITIAL.name:
            with contextlib.suppress(NoMatches):  # composed with the app
                found = self._ready[name] = self.app.query_one(f"#{name}")
        elif found is None and (mounting := self._mounting.get(name)) and mounting[0].is_mounted:
            found = mounting[0]  # mounted, its maker not resumed yet: what happens meanwhile reaches it
        return found

    def pane_state(self, name: str) -> tuple:
        """What a drawing pane draws, in the order its `show` takes it; () for a pane of its own
        state. A pane is drawn when this changes (compared by identity) and it is on screen."""
        app = self.app
        if name == "plans":
            return (app.result, app.search_result)
        if name == "latency":
            return (app.result, app.latency_history)
        if name in RESULT_PANES:
            return (app.result,)
        if name == "mask":
            return app.mask_config
        if name == "environment":
            return (app.environment, *app.restarts)
        return ()

    def draw_shown(self) -> None:
        """Draw the pane on screen if what it draws moved on (call after changing that state)."""
        with contextlib.suppress(NoMatches):  # as the app closes
            tab = BY_ID.get(self.app.query_one(TabbedContent).active)
            pane = self.pane(tab.name) if tab is not None else None
            if tab is None or pane is None:
                return
            state = self.pane_state(tab.name)
            drawn = self._drawn.get(tab.name)
            if not state or state[0] is None:
                return  # nothing to draw yet: the pane's own first look stays
            if drawn is not None and all(a is b for a, b in zip(state, drawn, strict=True)):
                return
            self._drawn[tab.name] = state
            pane.show(*state)

    async def show(self, tab: str) -> Widget | None:
        """Show a tab with its pane mounted and drawn (the pane is made before the tab shows, so
        the first look at it is never an empty frame)."""
        pane = await self.mount(tab)
        with contextlib.suppress(NoMatches):
            tabs = self.app.query_one(TabbedContent)
            screen, leaving = self.app.screen, tabs.active_pane
            inside = (
                tab != tabs.active
                and leaving is not None
                and screen.focused is not None
                and leaving in screen.focused.ancestors
            )
            if inside:  # hidden with focus, a table hands it to its neighbour, whose pane comes back
                screen.set_focus(tabs.query_one(Tabs))
            tabs.active = tab
            self.draw_shown()
            if inside and pane is not None:  # focus goes along, into the pane shown
                screen.set_focus(first_field(pane) or screen.focused)
        return pane

    async def mount(self, tab_id: str) -> Widget | None:
        """The pane of a tab, mounted first if it is not, once its widgets are (None as the app
        closes)."""
        tab = BY_ID.get(tab_id)
        if tab is None:
            return None
        if (ready := self.pane(tab.name)) is not None:
            return ready
        mounting = self._mounting.get(tab.name)
        if mounting is None:
            try:
                holder = self.app.query_one(f"#{tab.id}", TabPane)
            except NoMatches:
                return None
            widget = tab.pane_class()(id=tab.name)
            mounting = self._mounting[tab.name] = (widget, holder.mount(widget))
        widget, waiting = mounting
        await waiting
        self._ready[tab.name] = widget
        self._mounting.pop(tab.name, None)
        return widget

    async def activated(self, event: TabbedContent.TabActivated) -> None:
        """A tab shown by a click or by the app: its pane is made first, then drawn."""
        await self.mount(event.pane.id or "")
        self.draw_shown()
