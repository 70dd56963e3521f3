"""The dashboard fits 80x24 and 120x40: on every pane, at both sizes, nothing on screen is cut.

One app a size shows the H200's recordings pane by pane (the seed's result, then the one with
every peer), the idle panes of the long jobs and the presets' dialog, and reads the screen as
text: no `…` anywhere (where the footer's `alt+1…0` is the key's name), and every plan name,
figure, label and preset name the pane should show is there whole. A pane that scrolls is read
through, a page at a time, so what lies below the fold counts too.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from fakes import PEERS, RECORDED
from pilot_waits import show_pane, wait_for
from rich.console import Console
from textual.containers import ScrollableContainer
from textual.widgets import Button, Checkbox, Collapsible, Input, Label, OptionList

from tui.app import make_app
from tui.app.panes import TABS
from tui.app.widgets.latency import plan_label
from tui.engine.environment import describe
from tui.model.fields import FIELDS, OPEN_SECTIONS, SECTIONS
from tui.model.results import RunResult
from tui.present.format import ms, sci, us, verdict_words

SIZES = [(120, 40), (80, 24)]
FOOTER_KEY = "alt+1…0"  # the footer's name of the pane keys
HUNT_WORDS = ["budget", "seed", "focus", "6m", "paged,backward", "Start", "Stop"]  # its inputs and buttons


def screen_text(app) -> str:
    """What the terminal shows, as text."""
    console = Console(width=app.size.width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(app.screen._compositor.render_update(full=True), end="")
    return console.export_text()


async def drawn(pilot, wanted: list[str], scroller: ScrollableContainer | None = None) -> str:
    """The screen's text once it shows every string of `wanted` (a pane just made draws in the
    frames after it), or once `scroller` scrolls (what is below its fold is read page by page):
    where the wait runs out, the text as it is, for judge() to say what is missing. Each look
    renders the screen once, whatever the number of strings (a render is tens of ms)."""

    def shown() -> bool:
        if scroller is not None and scroller.max_scroll_y:
            return True
        text = screen_text(pilot.app)
        return all(w in text for w in wanted)

    with contextlib.suppress(AssertionError):
        await wait_for(pilot, shown, timeout=20)
    return screen_text(pilot.app)


async def read_through(pilot, name: str, wanted: list[str] = ()) -> str:
    """The pane `name` shown, and its screen text at each page it scrolls to (the first page once
    it is drawn: it shows what the pane shows above the fold of `wanted`, or all of it; a pane
    that turns out to scroll once drawn is read through too)."""
    await show_pane(pilot, name)
    pane = pilot.app.pane(name)
    scroller = pane if isinstance(pane, ScrollableContainer) else None
    if scroller is None or not scroller.max_scroll_y:
        texts = [await drawn(pilot, list(wanted), scroller)]
    else:
        await pilot.pause()
        texts = [screen_text(pilot.app)]
    if scroller is not None and scroller.max_scroll_y:
        while scroller.scroll_y < scroller.max_scroll_y:
            scroller.scroll_to(
                y=scroller.scroll_y + scroller.scrollable_content_region.height - 1, animate=False
            )
            await pilot.pause()
            texts.append(screen_text(pilot.app))
        scroller.scroll_home(animate=False)
        await pilot.pause()
    return "\n".join(texts)


def parts_cut(app, name: str) -> list[str]:
    """Each label, field and button of the pane `name` not on screen whole: the screen's line at
    its row, within its columns, holds its words (the same words elsewhere, in a pane's line of
    help, are not it). A field shows its value, or its placeholder while empty."""
    lines = screen_text(app).splitlines()
    found = []
    for part in app.pane(name).query("Label, Button, Input"):
        if isinstance(part, Input):
            words = part.value or part.placeholder
        else:
            words = str(part.label if isinstance(part, Button) else part.content)
        r = part.region
        shown = lines[r.y][r.x : r.right] if r and r.y < len(lines) else ""
        if words not in shown:
            found.append(f"{part.id or words!r} shows {shown.strip()!r}, not {words!r}")
    return found


def cut(text: str) -> list[str]:
    """The lines that end in an ellipsis: a word, figure or name cut short."""
    return [line for line in text.splitlines() if "…" in line.replace(FOOTER_KEY, "")]


def timed_plans(result: RunResult):
    return [(p, plan) for p in result.passes for plan in p.plans if plan.timing is not None]


def expected(result: RunResult, tab: str) -> list[str]:
    """What the pane `tab` shows of `result`, each string whole."""
    if tab == "plans":
        return [
            s for _, x in timed_plans(result) for s in (x.name, us(x.timing.median_us), sci(x.max_abs_error))
        ]
    if tab == "phases":
        return [s for p in result.passes for ph in p.phases for s in (ph.name, ms(ph.seconds))]
    if tab == "accuracy":
        every = [m for p in result.passes for c in p.checks for m in (c.cudnn, *c.peers.values())]
        return [s for m in every if m is not None for s in (sci(m.max_abs), verdict_words(m))]
    if tab == "latency":
        return [s for _, x in timed_plans(result) for s in (plan_label(x), us(x.timing.median_us))]
    if tab == "environment":
        rows = describe(result.environment)  # a long value is wrapped: each of its words whole
        return [key for key, _ in rows] + [word for _, value in rows for word in value.split()]
    if tab == "peers":
        return [peer.name for peer in result.forward.field_peers] + [
            us(peer.timing.median_us) for peer in result.forward.field_peers if peer.timing is not None
        ]
    return []


def form_words() -> list[str]:
    """The tabs' titles, the form's section titles and the labels of the fields in the sections
    open at first."""
    return (
        [t.title for t in TABS]
        + [*SECTIONS.values()]
        + [f.form_label for f in FIELDS if f.group in OPEN_SECTIONS]
    )


async def look(size: tuple[int, int]) -> dict[str, list[str]]:
    """What is wrong on each screen at `size`: the lines cut and the strings missing, by screen."""
    problems: dict[str, list[str]] = {}

    def judge(screen: str, text: str, wanted: list[str]) -> None:
        found = cut(text) + [f"missing {w!r}" for w in wanted if w not in text]
        if found:
            problems[screen] = found

    app = make_app(RECORDED.config, start_engine=False)
    async with app.run_test(size=size) as pilot:
        app.show_result(RECORDED)
        judge("form", await drawn(pilot, form_words()), form_words())
        for tab in ("plans", "phases", "accuracy", "latency", "environment", "graph", "mask"):
            judge(tab, await read_through(pilot, tab, expected(RECORDED, tab)), expected(RECORDED, tab))
        for tab in ("sweep", "explain", "history", "search"):  # their idle words
            judge(tab, await read_through(pilot, tab), [])
        judge("hunt", await read_through(pilot, "hunt", HUNT_WORDS), HUNT_WORDS)
        if parts := parts_cut(app, "hunt"):  # each whole where it is, not only somewhere on screen
            problems["hunt's inputs and buttons"] = parts
        app.show_result(PEERS)
        await pilot.pause()
        judge("peers", await read_through(pilot, "peers", expected(PEERS, "peers")), expected(PEERS, "peers"))
        for section in app.query(Collapsible):  # every section open, the form scrolled through
            section.collapsed = False
        await pilot.pause()
        form = app.query_one("#form")
        ticks = [str(t.label) for t in form.query(Checkbox)]
        labels = [str(label.content) for label in form.query(".field-label").results(Label)]
        texts = []
        for y in range(0, form.max_scroll_y + form.size.height, form.size.height - 1):
            form.scroll_to(y=y, animate=False)
            await pilot.pause()
            texts.append(screen_text(app))
        judge("form, every section open", "\n".join(texts), ticks + labels)
        await pilot.press("ctrl+o")
        picker = await _picker(pilot)
        first = [picker.get_option_at_index(i).id for i in range(min(3, picker.option_count))]
        judge("presets", screen_text(app), first)  # the first names whole; a cut one below shows a `…`
    return problems


async def _picker(pilot) -> OptionList:
    await wait_for(pilot, lambda: bool(pilot.app.screen.query("#picker-list")))
    picker = pilot.app.screen.query_one("#picker-list", OptionList)
    await wait_for(pilot, lambda: picker.option_count > 0 and picker.size.height > 0)
    return picker


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_pane_fits(size):
    assert asyncio.run(look(size)) == {}
