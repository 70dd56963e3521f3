"""Getting around by key: each pane on Alt+its number, F6 between the form and the panes.

Reaching a pane by Tab took 25-30 presses through the form's fields. The keys are priority
bindings, so they work while a field has focus; a pane added to TABS gets the next number.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import TabbedContent, Tabs


def pane_bindings(titles: list[str]) -> list[Binding]:
    """Alt+1 ... Alt+n show the panes in their order; the footer names the scheme once."""
    return [
        Binding(
            f"alt+{i}",
            f"show_pane({i - 1})",
            "Panes" if i == 1 else title,
            key_display=f"alt+1…{len(titles)}" if i == 1 else None,
            show=i == 1,
            priority=True,
        )
        for i, title in enumerate(titles, start=1)
    ] + [Binding("f6", "switch_region", "Form/panes", priority=True)]


class PaneNavigation:
    """The app's pane keys (a mixin of the App: `query_one`, `focused`)."""

    _form_focus: Widget | None = None

    def action_show_pane(self, index: int) -> None:
        tabs = self.query_one(TabbedContent)  # type: ignore[attr-defined]
        panes = list(tabs.query("TabPane"))
        if 0 <= index < len(panes):
            tabs.active = panes[index].id

    def action_switch_region(self) -> None:
        """From the form to the pane on show (its table, else the tab bar), and back to the
        field that had focus."""
        form = self.query_one("#form")  # type: ignore[attr-defined]
        focused = self.focused  # type: ignore[attr-defined]
        if focused is not None and form in focused.ancestors_with_self:
            self._form_focus = focused
            tabs = self.query_one(TabbedContent)  # type: ignore[attr-defined]
            pane = tabs.active_pane
            target = next((w for w in pane.query("*") if w.focusable), None) if pane else None
            (target or tabs.query_one(Tabs)).focus()
            return
        back = self._form_focus
        if back is None or not back.is_attached:
            back = next((w for w in form.query("*") if w.focusable), None)
        if back is not None:
            back.focus()
