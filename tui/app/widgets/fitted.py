"""A table laid out at its rows' height each time that height changes.

A DataTable of `height: auto` measures its rows when it is next idle, after they were added. If
the screen laid it out in between (a layout the clearing asked for, with the old rows' height)
Textual kept that height under the same layout count, and the later request for a layout, made
while the first was still pending, did not move the count on: the table stayed at its old height
(none, for a table filled once) until something else laid the screen out. Seen as an empty
Explain grid in one start of eight on a loaded machine. A new height asks for a layout once more,
after the screen's next refresh, when the earlier request is spent.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widgets import DataTable


class FittedTable(DataTable):
    """A DataTable whose auto height always follows its rows."""

    def watch_virtual_size(self, old: Size, new: Size) -> None:
        if new.height != old.height:
            self.call_after_refresh(self.refresh, layout=True)
