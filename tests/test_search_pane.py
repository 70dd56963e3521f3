"""The Search pane: a knob search of the form's configuration through the engine client, its
progress, then the pick against the best found and the fastest peer, the counts, the chart and the
fastest candidates; a cancel keeping what was found; the budget checked at its field; the best
pinned into the form; the Plans pane listing the finds. The fake engine answers a decode search in
the H200's proportions (tests/fakes.py, SEARCHED)."""

from __future__ import annotations

import io
from contextlib import asynccontextmanager

import pytest
from fakes import RECORDED, FakeEngine, relabelled, searched
from pilot_waits import click, show_pane, wait_for
from rich.console import Console
from textual.widgets import Input

from tui.app import make_app
from tui.app.widgets.search import BEST, PASSED, PICKED, WRONG, chart_points
from tui.model.search_results import SearchOptions, SearchResult

SEED = RECORDED.config


def text(app, selector: str) -> str:
    return " ".join(str(app.query_one(selector).render()).split())


def drawn(app, selector: str) -> str:
    """A Static's rich content as read on a wide terminal, its whitespace collapsed."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.query_one(selector).content)
    return " ".join(console.export_text().split())


def rows(table) -> list[list[str]]:
    """Each row's cells, those of the columns a narrow pane leaves out too."""
    every = getattr(table, "every_row", None)
    if every is not None:
        return [[str(c) for c in row] for row in every]
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def pane(app):
    return app.query_one("#search")


@asynccontextmanager
async def dashboard(searcher=None):
    """The seed's configuration in the form at 120x40, each run answered with the H200's recording
    and each search by `searcher` (the decode search, by default)."""
    fake = FakeEngine(relabelled(RECORDED), searcher=searcher)
    app = make_app(SEED, client=fake)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            yield app, pilot, fake
    finally:
        fake.close()


async def ready(pilot, fake: FakeEngine) -> None:
    """The form's first run answered, the Search pane shown (F3)."""
    app = pilot.app
    await wait_for(pilot, lambda: app.result is not None and not fake.busy)
    await pilot.press("f3")
    await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-search")


async def start(pilot, budget: str = "") -> None:
    field = pilot.app.query_one("#search-budget", Input)
    if budget:
        field.value = budget
    field.focus()
    await pilot.press("enter")


async def searched_once(pilot, fake: FakeEngine) -> SearchResult:
    await ready(pilot, fake)
    await start(pilot)
    await wait_for(pilot, lambda: pane(pilot.app).result is not None and not fake.busy)
    return pane(pilot.app).result


async def searched_again(pilot, fake: FakeEngine) -> SearchResult:
    """Once the search before has ended (its fresh run too), another from the Search pane."""
    app = pilot.app
    await wait_for(pilot, lambda: not app.searches.running and not fake.busy)
    before = pane(app).result
    await ready(pilot, fake)
    await start(pilot)
    await wait_for(
        pilot, lambda: pane(app).result is not before and not app.searches.running and not fake.busy
    )
    return pane(app).result


@pytest.mark.asyncio
async def test_a_search_says_each_candidate_then_the_pick_the_best_the_counts_the_chart_and_table():
    """One start, several searches in turn (a start is most of such a test's time): this test's
    own checks, then those of what were test_a_bad_budget_is_said_at_the_field_and_nothing_is_asked,
    test_form_edits_wait_for_the_search_and_run_when_it_ends and
    test_the_best_found_runs_in_a_fresh_process_and_the_pane_gives_both_figures."""
    from test_knob_search import fresh_run

    async with dashboard() as (app, pilot, fake):
        await ready(pilot, fake)
        fake.hold()  # the search pauses at its first candidate
        await click(pilot, "#search-start")
        await wait_for(pilot, lambda: "candidate 1, 1 KERNEL_CFG=0" in text(app, "#search-status"))
        assert "Esc or Cancel stops it" in text(app, "#search-status")
        assert "knob search: candidate 1, 1 KERNEL_CFG=0" in text(app, "#status")
        assert not app.query_one("#search-cancel").disabled and app.query_one("#search-start").disabled
        fake.release()
        await wait_for(pilot, lambda: pane(app).result is not None)
        assert fake.searches == [(SEED, SearchOptions(budget_s=60.0, peers=("flash", "efficient")))]
        assert (
            text(app, "#search-status")
            == f"searched {SEED.label()} in 41.0 s of a 60 s budget (space exhausted)"
        )
        summary = drawn(app, "#search-summary")
        for line in (
            "heuristic's pick 164.80 µs 1 KERNEL_CFG=3 eng1_k24=3",
            "best found 146.20 µs 1 KERNEL_CFG=27 eng1_k24=27 gain +11.3% against the pick",
            "fastest peer 126.00 µs torch FLASH",
            "candidates 63 tried, 54 built, 9 failed to build, 2 failed the check",
            "searched engine 1: KERNEL_CFG 0..63 (64 settings, tried whole)",
            "not searched engine 8: CUDNN_STATUS_NOT_SUPPORTED",
            "finding 1 KERNEL_CFG=30 130.00 µs, 1 KERNEL_CFG=45 135.00 µs: faster, but fail the check",
        ):
            assert line in summary
        assert app.query_one("#search-chart").display and "knob search" not in text(app, "#status")
        title, knob, marks = chart_points(pane(app).result)
        assert title == "engine 1: time by KERNEL_CFG (µs)" and knob == "KERNEL_CFG"
        assert {mark: len(points) for mark, points in marks.items()} == {
            PASSED: 52,
            WRONG: 2,
            PICKED: 1,
            BEST: 1,
        }
        assert marks[BEST] == [(27, 146.2)] and (3, 165.0) in marks[PICKED]
        table = rows(app.query_one("#search-table"))
        assert len(table) == 12 and [r[0] for r in table[:3]] == [
            "1 KERNEL_CFG=30",
            "1 KERNEL_CFG=45",
            "1 KERNEL_CFG=27",
        ]
        assert table[0][1:] == ["eng1_k24=30", "searched", "130.00 µs", "1", "5.00e-01", "check failed"]
        assert table[2][3] == "146.00 µs" and table[2][6] == "built"

        # a bad budget is said at the field and nothing is asked
        await wait_for(pilot, lambda: not fake.busy)
        searches, before = len(fake.searches), pane(app).result
        await start(pilot, "soon")
        error = app.query_one("#search-budget-error")
        await wait_for(pilot, lambda: error.display)
        assert "a budget is a positive duration such as 60s, 2m or 90 (got 'soon')" in text(
            app, "#search-budget-error"
        )
        assert app.query_one("#search-budget").has_class("-invalid") and len(fake.searches) == searches
        await start(pilot, "2m")
        await wait_for(pilot, lambda: pane(app).result is not before and not fake.busy)
        assert not error.display and fake.searches[-1][1].budget_s == 120.0, "the budget fixed"

        # form edits wait for the search and run when it ends
        before = pane(app).result
        fake.hold()
        await start(pilot)
        await wait_for(pilot, lambda: "candidate 1," in text(app, "#search-status"))
        runs = len(fake.requests)
        app.form.load(SEED.replace(b=2))
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.form.read()[0] == SEED.replace(b=2) and not app.run_pending)
        assert len(fake.requests) == runs and app.scheduler.run_after, "an edit took the engine"
        fake.release()
        await wait_for(pilot, lambda: pane(app).result is not before and app.result.config.b == 2)
        # the best found ran first, pinned, in the engine process that follows the search's; then the form
        asked = [config for config, _ in fake.requests[runs:]]
        assert asked == [SEED.replace(plan="1 KERNEL_CFG=27"), SEED.replace(b=2)]
        assert pane(app).result.status == "ok" and pane(app).result.fresh is not None

        # the best found runs in a fresh process and the pane gives both figures
        app.form.load(SEED)
        await wait_for(pilot, lambda: app.result.config == SEED and not fake.busy and not app.run_pending)
        before = pane(app).result
        fake.then(lambda reply, config, _options: reply.result(fresh_run(config)))
        await start(pilot)
        await wait_for(pilot, lambda: pane(app).result is not before and pane(app).result.fresh is not None)
        summary = drawn(app, "#search-summary")
        assert "best found 146.20 µs 1 KERNEL_CFG=27 eng1_k24=27 gain +11.3% against the pick" in summary
        assert (
            "fresh process as a pinned run reads it: 1 KERNEL_CFG=27 155.00 µs, pick 163.50 µs: +5.2%"
            in summary
        ), summary
        assert app.search_result.fresh.best_us == 155.0 and "knob search" not in text(app, "#status")


@pytest.mark.asyncio
async def test_esc_stops_a_search_keeping_its_finds_a_crash_costs_a_process_and_one_that_cannot_run_says_so():
    """Esc stops the search at its next candidate, keeping what it found; then, in the same app (a
    start is most of such a test's time), a search of each kind the engine may answer, in turn, the
    checks of what were test_a_candidate_that_crashes_the_engine_costs_that_process_and_the_search_goes_on
    and test_a_search_that_cannot_run_here_says_why_and_draws_nothing."""
    words = "a knob search builds and times plans on a GPU: CPU mode requested by the test"
    async with dashboard(searched(pause_at=28)) as (app, pilot, fake):  # held at KERNEL_CFG=28
        await ready(pilot, fake)
        fake.hold()
        await start(pilot)
        await wait_for(pilot, lambda: "candidate 28, 1 KERNEL_CFG=28" in text(app, "#search-status"))
        assert "best 146.00 µs (1 KERNEL_CFG=27)" in text(app, "#search-status")
        await pilot.press("escape")
        await wait_for(pilot, lambda: "stopping at the next candidate" in text(app, "#search-status"))
        fake.release()
        await wait_for(pilot, lambda: pane(app).result is not None)
        r = pane(app).result
        assert r.status == "cancelled" and len(r.searched()) == 27 and r.best.plan == "1 KERNEL_CFG=27"
        assert text(app, "#search-status").startswith(
            "stopped when asked after 14.0 s: what it had found so far"
        )
        summary = drawn(app, "#search-summary")
        assert "heuristic's pick - best found 146.00 µs 1 KERNEL_CFG=27 eng1_k24=27 gain -" in summary
        assert "candidates 27 tried, 24 built, 3 failed to build, 0 failed the check" in summary
        assert app.query_one("#search-chart").display and len(rows(app.query_one("#search-table"))) == 12
        assert not app.query_one("#search-start").disabled and app.query_one("#search-cancel").disabled

        # a candidate that crashes the engine costs that process and the search goes on
        fake.searcher = searched(crash_at="1 KERNEL_CFG=12")
        searches = len(fake.searches)
        r = await searched_again(pilot, fake)
        assert len(fake.searches) == searches + 2 and fake.restarts == 1
        again = fake.searches[-1][1]
        assert again.crashes[0].startswith("1 KERNEL_CFG=12: the engine process died (SIGSEGV")
        assert [t.plan for t in again.resume][-1] == "1 KERNEL_CFG=12" and r.status == "ok"
        assert "crashed 1 KERNEL_CFG=12: the engine process died (SIGSEGV" in drawn(app, "#search-summary")

        # a search that cannot run here says why and draws nothing
        fake.searcher = searched(SearchResult(SEED, "cpu_only", words))
        await searched_again(pilot, fake)
        assert text(app, "#search-status") == f"CPU_ONLY: {words}"
        assert not app.query_one("#search-chart").display and not app.query_one("#search-table").display
        assert app.query_one("#search-pin").disabled


@pytest.mark.asyncio
async def test_the_plans_pane_lists_the_finds_for_that_configuration_only_and_pin_best_sets_the_forms_plan(
    tmp_path, monkeypatch
):
    """The Plans pane lists the finds after the heuristic's plans, for that configuration only;
    then, in the same app (a start is most of such a test's time), what was
    test_pin_best_sets_the_forms_plan_the_form_runs_it_and_ctrl_s_keeps_it, from that search's
    answer once the form holds the configuration searched again."""
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path))
    async with dashboard() as (app, pilot, fake):
        plans = app.query_one("#plans-forward")
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        assert [r[1] for r in rows(plans)] == ["H*", "", "", "", "", ""]  # no search: the plans alone
        await searched_once(pilot, fake)
        await show_pane(pilot, "plans")  # hidden while the Search pane showed: drawn when shown
        table = rows(plans)
        own, found = table[:6], table[6:]
        assert [r[2] for r in own] == [p.name for p in RECORDED.forward.plans]
        assert len(found) == 12 and {r[1] for r in found} == {"S"} and {r[6] for r in found} == {"search"}
        assert found[0][2:5] == ["eng1_k24=27", "146.20 µs", f"{RECORDED.forward.flops / 146.2 / 1e6:.1f}"]
        assert found[0][7:9] == ["1", "KERNEL_CFG=27"]
        names = [r[2] for r in found]
        assert "eng1_k24=5" not in names and "eng1_k24=30" not in names  # listed already; failed the check
        assert "S: found by the knob search (its 12 fastest that passed)" in text(app, "#plans-forward-head")
        await pilot.press("alt+1")
        plans.focus()
        await wait_for(pilot, lambda: plans.has_focus)
        plans.move_cursor(row=6)
        await wait_for(pilot, lambda: "found by the knob search" in text(app, "#plan-detail"))
        assert "forward plan 1 KERNEL_CFG=27: eng1_k24=27" in text(app, "#plan-detail")
        app.form.load(SEED.replace(b=2))  # another configuration: the finds are not its own
        await wait_for(pilot, lambda: app.result.config.b == 2)
        assert len(rows(plans)) == 6

        # pin best sets the form's plan, the form runs it, and Ctrl+S keeps it
        app.form.load(SEED)  # the configuration searched, back in the form
        await wait_for(pilot, lambda: app.result.config == SEED and not fake.busy and not app.run_pending)
        await ready(pilot, fake)  # the Search pane again, with the search's answer
        assert not app.query_one("#search-pin").disabled
        app.query_one("#search-table").focus()
        await pilot.press("p")
        pinned = SEED.replace(plan="1 KERNEL_CFG=27")
        await wait_for(pilot, lambda: app.query_one("#f-plan", Input).value == "1 KERNEL_CFG=27")
        assert app.form.read()[0] == pinned
        await wait_for(pilot, lambda: fake.requests[-1][0] == pinned and app.result.config == pinned)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SavePreset")
        await pilot.press(*"decode-pinned", "enter")
        await wait_for(pilot, lambda: "decode-pinned" in app.presets)
        assert app.presets["decode-pinned"].config.plan == "1 KERNEL_CFG=27"


@pytest.mark.asyncio
async def test_the_palette_names_the_pane_and_a_viewer_of_a_saved_result_cannot_search():
    from tui.app.commands import ExplorerCommands

    app = make_app(opened=RECORDED, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        commands = {name: words for name, _cb, words in ExplorerCommands(app.screen)._commands()}
        assert commands["Pane: Search"] == "show the Search pane (F3)"
        assert {"Search: start", "Search: pin the best found"} <= set(commands)
        await pilot.press("f3")
        await start(pilot)
        await wait_for(pilot, lambda: "No engine runs here" in text(app, "#search-status"))
