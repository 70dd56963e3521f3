"""The footer of keys, redrawn only when the keys it shows change.

Textual's Footer rebuilds all its keys on every bindings update, and moving focus sends one or
more: a Tab between two fields (whose keys are the same) cost a recompose and a full layout of
the screen each time, most of what a key took to answer on a 2-CPU machine.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """A Footer that compares what it would show with what it shows before rebuilding."""

    _shown: tuple | None = None

    def _keys(self) -> tuple:
        """What compose() would draw: each shown key's action, key, words, state and tooltip."""
        bindings = self.screen.active_bindings
        keys = tuple(
            (binding.action, binding.key, binding.description, enabled, tooltip, binding.group)
            for _, binding, enabled, tooltip in bindings.values()
            if binding.show
        )
        palette = bindings.get(self.app.COMMAND_PALETTE_BINDING)
        return keys, palette[2] if palette else None, self.compact

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
