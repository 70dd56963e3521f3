"""Getting around by key, the app's part of it: Alt+digit shows a pane, F6 goes between the form
and the panes and back to the field that had focus (the keys themselves: navigation.py)."""

from __future__ import annotations

from textual.actions import SkipAction
from textual.widget import Widget
from textual.widgets import TabbedContent, Tabs

from .host import Host


def first_field(pane: Widget) -> Widget | None:
    """The first focusable widget in `pane` that holds none: a pane that scrolls is focusable
    itself, and F6 must reach the input inside it, not the scrolling box."""
    focusable = [w for w in pane.query("*") if w.focusable]
    return next((w for w in focusable if not any(w in other.ancestors for other in focusable)), None)


class PaneKeys:
    """The app's pane keys: Alt+digit shows a pane, F6 goes between the form and the panes."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self._form_focus: Widget | None = None

    async def show(self, index: int) -> None:
        if len(self.app.screen_stack) > 1:  # a dialog: the key is typed there
            raise SkipAction()
        tabs = self.app.query_one(TabbedContent)
        panes = list(tabs.query("TabPane"))
        if 0 <= index < len(panes):
            await self.app.show_pane(panes[index].id)

    def switch_region(self) -> None:
        """From the form to the pane on show (its table, else the tab bar), and back to the
        field that had focus."""
        form = self.app.query_one("#form")
        focused = self.app.focused
        if focused is not None and form in focused.ancestors_with_self:
            self._form_focus = focused
            tabs = self.app.query_one(TabbedContent)
            pane = tabs.active_pane
            target = first_field(pane) if pane else None
            (target or tabs.query_one(Tabs)).focus()
            return
        back = self._form_focus
        if back is None or not back.is_attached:
            back = next((w for w in form.query("*") if w.focusable), None)
        if back is not None:
            back.focus()
