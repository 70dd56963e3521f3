"""The tab panes: each is made the first time it is shown, and drawn while it is shown.

Twelve panes styled, laid out and drawn at start, and each result drawn into all of them, were
half of the dashboard's start and most of what a result cost on screen. A pane is mounted the
first time its tab is shown, and stays. A pane that draws the app's state (the form's result, its
configuration's mask, the environment) is drawn when that state changes while it is on screen,
or when it is shown after the state moved on. The panes with state of their own (Sweep, Explain,
History, Search) are driven by the app once they exist: nothing reaches them before.
"""

from __future__ import annotations

import contextlib
from typing import TypeVar

from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.widget import AwaitMount, Widget
from textual.widgets import TabbedContent, TabPane, Tabs

from .widgets import (
    AccuracyPane,
    EnvironmentPane,
    GraphPane,
    LatencyPane,
    MaskPane,
    PeersPane,
    PhasesPane,
    PlansPane,
    SweepPane,
)
from .widgets.explain import ExplainPane
from .widgets.history import HistoryPane
from .widgets.search import SearchPane

# the tabs, in order (a new one goes last: Alt+digit keys stay; the tenth is Alt+0)
TABS = (
    ("Plans", PlansPane),
    ("Peers", PeersPane),
    ("Phases", PhasesPane),
    ("Accuracy", AccuracyPane),
    ("Latency", LatencyPane),
    ("Mask", MaskPane),
    ("Environment", EnvironmentPane),
    ("Graph", GraphPane),
    ("Sweep", SweepPane),
    ("Explain", ExplainPane),
    ("History", HistoryPane),  # the eleventh: F2 (and the palette)
    ("Search", SearchPane),  # the twelfth: F3
)
INITIAL_TAB = "tab-plans"
KINDS = {f"tab-{title.lower()}": kind for title, kind in TABS}
RESULT_PANES = (PlansPane, PeersPane, PhasesPane, AccuracyPane, LatencyPane, GraphPane)  # the form's result

P = TypeVar("P", bound=Widget)


class PaneDeck:
    """Mixed into the app before the panes' drivers: a pane is mounted before they look at it.

    The app keeps what the drawing panes show: `result`, `search_result`, `latency_history`,
    `mask_config` (the form's configuration and seed) and `environment` with `restarts`."""

    _panes_ready: dict[type, Widget]
    _panes_drawn: dict[type, tuple]
    _panes_mounting: dict[type, AwaitMount]

    def compose_panes(self) -> ComposeResult:
        self._panes_ready, self._panes_drawn, self._panes_mounting = {}, {}, {}
        with TabbedContent(initial=INITIAL_TAB, id="tabs"):
            for title, kind in TABS:
                with TabPane(title, id=f"tab-{title.lower()}"):
                    if kind is KINDS[INITIAL_TAB]:
                        yield kind(id=title.lower())

    def pane(self, kind: type[P]) -> P | None:
        """The pane of this kind once it is mounted with its widgets, else None."""
        found = self._panes_ready.get(kind)
        if found is None and kind is KINDS[INITIAL_TAB]:
            with contextlib.suppress(NoMatches):  # composed with the app
                found = self._panes_ready[kind] = self.query_one(kind)  # type: ignore[attr-defined]
        return found  # type: ignore[return-value]

    def pane_state(self, kind: type) -> tuple:
        """What a drawing pane draws, in the order its `show` takes it; () for a pane of its own
        state. A pane is drawn when this changes (compared by identity) and it is on screen."""
        app = self
        if kind is PlansPane:
            return (app.result, app.search_result)  # type: ignore[attr-defined]
        if kind is LatencyPane:
            return (app.result, app.latency_history)  # type: ignore[attr-defined]
        if kind in RESULT_PANES:
            return (app.result,)  # type: ignore[attr-defined]
        if kind is MaskPane:
            return app.mask_config  # type: ignore[attr-defined]
        if kind is EnvironmentPane:
            return (app.environment, *app.restarts)  # type: ignore[attr-defined]
        return ()

    def draw_shown(self) -> None:
        """Draw the pane on screen if what it draws moved on (call after changing that state)."""
        with contextlib.suppress(NoMatches):  # as the app closes
            kind = KINDS.get(self.query_one(TabbedContent).active)  # type: ignore[attr-defined]
            pane = self.pane(kind) if kind is not None else None
            if pane is None:
                return
            state = self.pane_state(kind)
            drawn = self._panes_drawn.get(kind)
            if not state or state[0] is None:
                return  # nothing to draw yet: the pane's own first look stays
            if drawn is not None and all(a is b for a, b in zip(state, drawn, strict=True)):
                return
            self._panes_drawn[kind] = state
            pane.show(*state)  # type: ignore[attr-defined]

    async def show_pane(self, tab: str) -> Widget | None:
        """Show a tab with its pane mounted and drawn (the pane is made before the tab shows, so
        the first look at it is never an empty frame)."""
        pane = await self.mount_pane(tab)
        with contextlib.suppress(NoMatches):
            tabs = self.query_one(TabbedContent)  # type: ignore[attr-defined]
            screen, leaving = self.screen, tabs.active_pane  # type: ignore[attr-defined]
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
                screen.set_focus(next((w for w in pane.query("*") if w.focusable), None) or screen.focused)
        return pane

    async def mount_pane(self, tab: str) -> Widget | None:
        """The pane of a tab, mounted first if it is not, once its widgets are (None as the app
        closes)."""
        kind = KINDS.get(tab)
        if kind is None:
            return None
        if (ready := self.pane(kind)) is not None:
            return ready
        waiting = self._panes_mounting.get(kind)
        if waiting is None:
            try:
                holder = self.query_one(f"#{tab}", TabPane)  # type: ignore[attr-defined]
            except NoMatches:
                return None
            widget = kind(id=tab.removeprefix("tab-"))
            waiting = self._panes_mounting[kind] = holder.mount(widget)
        await waiting
        widget = self._panes_ready[kind] = self._panes_ready.get(kind) or self.query_one(kind)  # type: ignore[attr-defined]
        self._panes_mounting.pop(kind, None)
        return widget

    async def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """A tab shown by a click or by the app: its pane is made first, then drawn."""
        await self.mount_pane(event.pane.id or "")
        self.draw_shown()
