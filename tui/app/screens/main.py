"""The dashboard's own screen: a focus move repaints what it changes, its first showing does
not restyle what was just styled, and a resize to the size it has does not lay it out again.

Textual's Screen repaints every widget when focus moves; the widgets that gain or lose focus
(and the containers whose focus-within changes) are restyled and repaint themselves anyway, so
the full repaint only cost each Tab a frame of the whole screen. A screen restyles all its
widgets each time it is resumed, the first time too, right after each was styled as it mounted.
And it lays itself out in full at each resize it is told of, three times at start for the size it
was just laid out at (the app's start, the terminal's size, its own first layout).
"""

from __future__ import annotations

from textual import events
from textual.geometry import Size
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class MainScreen(Screen):
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    AUTO_FOCUS = "#form Input"  # the first field, ready to type (not its section's title)

    _resumed = False

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """The first resume does not restyle every widget: each was styled as it mounted, and
        nothing has changed since (a third of a second of the start on two cores). Screen's own
        handler runs next, as Textual calls each class's handler in turn."""
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False

    def _screen_resized(self, size: Size) -> None:
        """Laid out again only for a new size: what changed inside asks for its own layout."""
        if size != self._compositor.size:
            super()._screen_resized(size)
