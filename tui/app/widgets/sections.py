"""Sections of a pane that exist only for some results (the backward's, FP8's)."""

from __future__ import annotations

from textual.widget import Widget


def show_backward(pane: Widget, shown: bool, *ids: str) -> None:
    """The backward's widgets take room only when the result has a backward; the pane's
    `-with-backward` class lets the stylesheet share the height between both sections."""
    pane.set_class(shown, "-with-backward")
    for widget_id in ids:
        pane.query_one(f"#{widget_id}").display = shown
