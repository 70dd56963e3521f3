"""Widgets of auto height laid out exactly when that height changes.

A line of words (FittedStatic): Textual lays the whole screen out at every update of a Static,
whether its height changed or not; a pane saying its progress, a head line or the headline cost a
full layout and paint of the screen at each new word. The line is repainted alone when its words
take as many rows as before, and laid out when they do not.

A table (FittedTable): a DataTable of `height: auto` measures its rows when it is next idle,
after they were added. If the screen laid it out in between (a layout the clearing asked for, with
the old rows' height) Textual kept that height under the same layout count, and the later request
for a layout, made while the first was still pending, did not move the count on: the table stayed
at its old height (none, for a table filled once) until something else laid the screen out. Seen
as an empty Explain grid in one start of eight on a loaded machine. A new height asks for a layout
once more, after the screen's next refresh, when the earlier request is spent.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.visual import VisualType
from textual.widgets import DataTable, Static


class FittedStatic(Static):
    """A Static that asks for a layout only when new content changes its height."""

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(content, layout=False)
        if layout and self._height_may_change():
            self.refresh(layout=True)

    def _height_may_change(self) -> bool:
        width, height = self.size
        styles = self.styles
        if not width or (styles.width is not None and styles.width.is_auto):
            return True  # not laid out yet, or its width follows its words
        if styles.height is not None and not styles.height.is_auto:
            return False  # a height of its own: words move nothing
        return self.get_content_height(self.size, self.app.size, width) != height


class FittedTable(DataTable):
    """A DataTable whose auto height always follows its rows."""

    def watch_virtual_size(self, old: Size, new: Size) -> None:
        if new.height != old.height:
            self.call_after_refresh(self.refresh, layout=True)
