"""The footer of keys, in the app's order, redrawn only when the keys it shows change.

Textual's Footer rebuilds all its keys on every bindings update, and moving focus sends one or
more: a Tab between two fields (whose keys are the same) cost a recompose and a full layout of
the screen each time, most of what a key took to answer on a 2-CPU machine. And it lists them in
the order the focused widget's own keys meet the app's: Ctrl+E, an Input's "end", put Export
first while a field had focus and fifth from a table, so the keys moved with the focus.
Below 100 columns the keys say shorter words and the palette's key (^p, in the help) goes, so
the row fits 80 columns. Its keys are composed with it, in the first frame: Textual's Footer waits
for the first bindings update, after the focus is first given, and the first full frame waited
on a second recompose, layout and paint for them.
"""

from __future__ import annotations

from functools import cached_property

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PALETTE = "command_palette"
NARROW = 100  # columns: below, the short words (the app's -narrow breakpoint)
SHORT = {"run": "Run", "save_preset": "Save", "switch_region": "Form/panes"}  # action -> its short words


class KeysFooter(Footer):
    """A Footer that compares what it would show with what it shows before rebuilding."""

    _shown: tuple | None = None

    @cached_property
    def _declared(self) -> dict[str, int]:
        """The app's actions, in the order its BINDINGS declare them (first place of each)."""
        actions = [b.action for b in self.app.BINDINGS if not isinstance(b, tuple)]
        return {action: actions.index(action) for action in actions}

    def _place(self, action: str) -> tuple[int, int]:
        """Where a key goes: the app's keys in the order it declares them, then those of the
        widget with focus, then the palette's."""
        if action in self._declared:
            return (0, self._declared[action])
        return (2, 0) if action == PALETTE else (1, 0)

    @property
    def narrow(self) -> bool:
        return self.app.size.width < NARROW

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:  # the first compose: the app's keys, known before any focus
            self._bindings_ready = True
            self._shown = self._keys()
        keys = sorted(
            super().compose(), key=lambda w: self._place(w.action) if isinstance(w, FooterKey) else (1, 0)
        )
        for key in keys:
            if isinstance(key, FooterKey):
                if self.narrow and key.action == PALETTE:
                    continue
                if self.narrow:
                    key.description = SHORT.get(key.action, key.description)
                # its class now, not from the compact binding as it mounts: that restyled each key
                key.set_class(self.compact, "-compact", update=False)
            yield key

    def on_resize(self) -> None:
        if self._shown is not None and self._shown[-1] != self.narrow:
            self.call_after_refresh(self._recompose_if_changed)

    def _keys(self) -> tuple:
        """What compose() would draw: each shown key's action, key, words, state and tooltip."""
        bindings = self.screen.active_bindings
        shown = [
            (binding, enabled, tooltip) for _, binding, enabled, tooltip in bindings.values() if binding.show
        ]
        keys = tuple(
            (binding.action, binding.key, binding.description, enabled, tooltip, binding.group)
            for binding, enabled, tooltip in sorted(shown, key=lambda b: self._place(b[0].action))
        )
        palette = bindings.get(self.app.COMMAND_PALETTE_BINDING)
        return keys, palette[2] if palette else None, self.compact, self.narrow

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        if not self.is_attached:
            return
        keys = self._keys()
        if keys != self._shown:
            self._shown = keys
            await self.recompose()
