"""The first frame is the final layout: nothing moves once the dashboard has settled, at 80x24
(where the form narrows) and at 120x40."""

from __future__ import annotations

import re
from html import unescape

import pytest
from textual.screen import Screen

from tui.app import make_app
from tui.model.config import SdpaConfig

# drawn once the layout is known (scrollbar thumbs, the active tab's underline): not a move
DECORATION = re.compile(r"[▁▂▃▄▅▆▇█▍▌▎▏╸╺━]")


def text_lines(svg: str) -> list[str]:
    """The screenshot's text, row by row (what a reader sees, without colours)."""
    rows: dict[float, list[str]] = {}
    for y, text in re.findall(r'<text [^>]*y="([0-9.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(y), []).append(unescape(re.sub("<[^>]+>", "", text)).replace("\xa0", " "))
    return [DECORATION.sub("", "".join(parts)).rstrip() for _, parts in sorted(rows.items())]


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_first_frame_has_the_final_layout(size, monkeypatch):
    first: list[str] = []
    paint = Screen._compositor_refresh

    def keep_the_first_frame(screen: Screen) -> None:
        if not first and screen is screen.app.screen:
            first.append(screen.app.export_screenshot(simplify=True))
        paint(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", keep_the_first_frame)
    app = make_app(SdpaConfig(), start_engine=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        settled = app.export_screenshot(simplify=True)
    before, after = text_lines(first[0]), text_lines(settled)
    assert before == after  # the footer's keys too: composed with it, not a frame later
    assert "cuDNN SDPA Explorer" in before[0]  # the title row at 24 rows too, from the first frame
