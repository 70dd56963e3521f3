"""The dashboard's own screen: a focus move repaints what it changes, not the whole screen.

Textual's Screen repaints every widget when focus moves; the widgets that gain or lose focus
(and the containers whose focus-within changes) are restyled and repaint themselves anyway, so
the full repaint only cost each Tab a frame of the whole screen.
"""

from __future__ import annotations

from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class MainScreen(Screen):
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
