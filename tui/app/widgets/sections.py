"""Each pass's section of a pane: the widgets of the passes a result has take room, the others none."""

from __future__ import annotations

from textual.widget import Widget

from ...model.statuses import PASS_KINDS


def show_passes(pane: Widget, prefix: str, kinds: tuple[str, ...], lone_head: bool = False) -> None:
    """Show `#{prefix}-{kind}` for each pass in `kinds` (the first kind's when there is none yet)
    and its heading `#{prefix}-{kind}-head` when there are several passes (or always, with
    `lone_head`); the pane's `-passes` class lets the stylesheet share the height between them."""
    for kind in PASS_KINDS:
        shown = kind in kinds or (not kinds and kind == PASS_KINDS[0])
        pane.query_one(f"#{prefix}-{kind}").display = shown
        pane.query_one(f"#{prefix}-{kind}-head").display = shown and (lone_head or len(kinds) > 1)
    pane.set_class(len(kinds) > 1, "-passes")
