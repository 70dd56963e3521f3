"""The Explain pane: the form's configuration explained through the engine client, shown as a grid
of implementation x heuristic mode, the refusals, the versions and the nearest configurations, one
Enter from the form. Most tests answer from explanations recorded with `explain --json` on a machine
without a GPU (tests/fakes.py); one asks the real engine process."""

from __future__ import annotations

import io

import pytest
import test_snapshots as snapshots
from fakes import (
    EXPLAINED_D65,
    EXPLAINED_HEADS,
    NO_GPU,
    RECORDED,
    FakeEngine,
    explain_crash,
    refused,
    relabelled,
)
from pilot_waits import wait_for
from rich.console import Console
from textual.widgets import Input

from tui.app import make_app
from tui.model.config import SdpaConfig
from tui.model.options import RunOptions, TimingOptions
from tui.process.client import EngineProgress

D65 = EXPLAINED_D65.config  # the seed's shape with head dims of 65: validate() refuses it
HEADS_6_4 = EXPLAINED_HEADS.config  # 6 query heads over 4: the tool's rule and validate() refuse it


def text_of(renderable) -> str:
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def rows(table) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def pane(app):
    return app.query_one("#explain")


def explained(app, config: SdpaConfig):
    """A predicate: the pane shows the explanation of `config`."""
    return lambda: pane(app).explanation is not None and pane(app).explanation.config == config


@pytest.mark.asyncio
async def test_a_refused_run_points_to_the_pane_which_asks_once_shown_and_draws_the_grid(snapshot):
    """A refused run's status line points to the pane, which asks once shown and draws the grid;
    its screens compared with their snapshots (what was test_snapshots.py's test_explain_pane: the
    seed's shape with head dims of 65, refused, the explanation recorded without a GPU); then, in
    the same app (a start is most of such a test's time), what was
    test_enter_on_a_nearest_configuration_puts_its_edit_into_the_form_and_keeps_the_rest: F6 from a
    field lands on the nearest configurations; Enter on the second (head dims 72) sets d_qk and d_v
    and nothing else: the batch the user typed since, the peers ticked, stay."""
    fake = FakeEngine(refused())
    app = make_app(D65, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        assert "(why: Alt+0 Explain)" in str(app.query_one("#status").render())
        assert fake.explained == []  # not shown: not asked
        await pilot.press("alt+0")
        await wait_for(pilot, explained(app, D65))
        assert fake.explained == [D65]
        e = EXPLAINED_D65
        cells = app.query_one("#explain-cells")
        assert [str(c.label) for c in cells.columns.values()] == ["implementation", *e.modes]
        grid = rows(cells)
        assert [r[0] for r in grid] == list(e.implementations) == ["auto", "composite", "unified"]
        assert {cell for r in grid for cell in r[1:]} == {"✗ validate #1"}  # every cell, by validate()
        refusals = " ".join(str(app.query_one("#explain-refusals").render()).split())
        assert (
            "#1 [frontend validate()] forward graph at validate (every cell): hidden_dim should be multiple of 8"
            in refusals
        )
        versions = text_of(app.query_one("#explain-versions").content)
        assert any(line.split() == ["cuDNN", "frontend", "1.32.0"] for line in versions.splitlines())
        assert "needs a GPU to know more" in " ".join(versions.split())
        nearest = rows(app.query_one("#explain-nearest"))
        assert [r[1] for r in nearest] == [
            ", ".join(f"{f} {a} → {b}" for f, a, b in n.changes) for n in e.nearest
        ]
        assert nearest[0][1:] == ["d_qk 65 → 64, d_v 65 → 64", "validate()"]
        command = str(app.query_one("#explain-nearest-words").render())
        assert command.endswith("#1: sdpa-explorer run --d-qk 64 --d-v 64")  # the highlighted one's

        # the screens, compared with their snapshots: F6 from the form, the first nearest
        # configuration highlighted, at 120x40 and 80x24
        await pilot.press("f6")
        words = app.query_one("#explain-nearest-words")
        await wait_for(
            pilot,
            lambda: (
                app.focused is app.query_one("#explain-nearest")
                and "#1: " in str(words.render())
                and cells.size.height > cells.row_count > 0  # the grid filled and laid out
            ),
        )
        shots = {"120x40": await snapshots.screenshot(pilot, snapshots.pane("explain"))}
        shots["80x24"] = await snapshots.screenshot(pilot, snapshots.terminal(80, 24))
        # at 80 columns the grid gives its numbers alone: every mode's column in view, none scrolled off
        assert cells.virtual_size.width <= cells.size.width, (cells.virtual_size, cells.size)
        assert snapshots.mismatched(snapshot, shots) == []
        await pilot.resize_terminal(120, 40)
        app.query_one("#f-b", Input).focus()

        await pilot.press("alt+1", "alt+0")  # shown again, nothing changed: not asked again
        await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-explain")
        assert fake.explained == [D65]

        # Enter on a nearest configuration puts its edit into the form and keeps the rest
        app.form.load_options(RunOptions(peers=("flash",), timing=TimingOptions(l2_flush=True)))
        await pilot.press("alt+0")
        await wait_for(pilot, explained(app, D65))
        fake.answer = relabelled(RECORDED)
        app.query_one("#f-b", Input).focus()
        await pilot.press("f6")
        assert app.focused is app.query_one("#explain-nearest")
        assert "#1: sdpa-explorer run --d-qk 64 --d-v 64" in str(
            app.query_one("#explain-nearest-words").render()
        )
        fake.hold()  # an edit after the explanation, its run under way: the nearest's edit goes over it
        app.form.load(D65.replace(b=2))
        await wait_for(
            pilot,
            lambda: app.form.read()[0] == D65.replace(b=2) and app.scheduler.in_flight("run") is not None,
        )
        await pilot.press("down", "enter")
        want = D65.replace(b=2, d_qk=72, d_v=72)
        await wait_for(pilot, lambda: app.form.read()[0] == want)
        fake.release()
        assert app.form.options == RunOptions(peers=("flash",), timing=TimingOptions(l2_flush=True))
        await wait_for(pilot, lambda: app.result.config == want and explained(app, want)())
        assert fake.requests[-1][0] == want and fake.explained[-1] == want  # the run first, then the pane's


@pytest.mark.asyncio
async def test_an_edit_runs_first_then_the_pane_asks_and_a_rule_the_form_refuses_is_explained():
    """While the pane is shown: an edit is run first, then explained; a configuration the form's
    rules refuse (6 heads over 4) runs nothing but is explained (the rules are findings here)."""
    fake = FakeEngine(relabelled(RECORDED))
    small = SdpaConfig(b=1, h_q=6, h_kv=6, s_q=64, s_kv=64)
    app = make_app(small, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        await pilot.press("alt+0")
        await wait_for(pilot, explained(app, small))
        fake.hold()  # the edit's run stays under way: the pane says it waits for it
        app.query_one("#f-s_q", Input).value = "32"
        await wait_for(
            pilot, lambda: "The form's run comes first" in str(app.query_one("#explain-head").render())
        )
        assert "below: the explanation of b1 h6 s64" in str(app.query_one("#explain-head").render())
        assert fake.explained == [small]
        fake.release()
        await wait_for(pilot, explained(app, small.replace(s_q=32)))
        runs = len(fake.requests)
        app.form.load(HEADS_6_4)
        await wait_for(pilot, explained(app, HEADS_6_4))
        assert len(fake.requests) == runs  # the form's rules refuse it: nothing ran
        grid = rows(app.query_one("#explain-cells"))
        assert {cell for r in grid for cell in r[1:]} == {"✗ validate #2"}  # #1: the tool's rule, everywhere
        refusals = " ".join(str(app.query_one("#explain-refusals").render()).split())
        assert (
            "[tool] forward graph at rules, field h_kv (every cell): h_q must be a multiple of h_kv"
            in refusals
        )
        kv = [r[1] for r in rows(app.query_one("#explain-nearest"))]
        assert kv[0] == "h_kv 4 → 3"


@pytest.mark.asyncio
async def test_an_explanation_that_crashes_the_engine_is_said_and_not_asked_again_until_an_edit():
    fake = FakeEngine(refused(), explainer=explain_crash())
    app = make_app(D65, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        await pilot.press("alt+0")
        head = app.query_one("#explain-head")
        await wait_for(pilot, lambda: "The engine process ended while it explained" in str(head.render()))
        assert "SIGSEGV" in str(head.render()) and fake.restarts == 1
        await pilot.press("alt+1", "alt+0")
        await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-explain" and not fake.busy)
        assert fake.explained == [D65]  # it would crash again
        app.form.load(D65.replace(b=2))
        await wait_for(pilot, lambda: len(fake.explained) == 2)


@pytest.mark.asyncio
async def test_an_explanation_a_later_request_overtook_is_asked_again():
    """The engine answers only the newest waiting request: words about a later one mean the
    explanation was dropped, and the pane asks again once the engine is free."""
    fake = FakeEngine(relabelled(RECORDED))
    app = make_app(D65, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        fake.hold()  # the explanation is asked, and held
        await pilot.press("alt+0")
        await wait_for(pilot, lambda: app.scheduler.in_flight("explain") is not None)
        asked = app.scheduler.in_flight("explain")
        app.explains.event(EngineProgress(asked + 1, "building the forward"))  # a later request's words
        assert app.scheduler.in_flight("explain") is None
        fake.release()
        await wait_for(pilot, explained(app, D65))


def test_the_real_engine_process_explains_without_a_gpu(engine_process):
    """The request through the child: validate() answers, as `explain` on this machine does."""
    from tui.process.session import EngineSession

    with EngineSession(engine_process) as session:
        e = session.explain(D65)
        assert e.verdict == EXPLAINED_D65.verdict and not e.gpu
        assert [n.config for n in e.nearest] == [n.config for n in EXPLAINED_D65.nearest]
        assert NO_GPU.unavailable_reason in e.gpu_note
        assert session.explain(HEADS_6_4).rules == EXPLAINED_HEADS.rules


@pytest.mark.asyncio
async def test_the_palette_names_the_pane_and_a_viewer_of_a_saved_result_says_it_cannot_ask():
    from tui.app.commands import ExplorerCommands

    app = make_app(opened=RECORDED, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        commands = {name: words for name, _cb, words in ExplorerCommands(app.screen)._commands()}
        assert commands["Pane: Explain"] == "show the Explain pane (Alt+0)"
        await pilot.press("alt+0")
        head = app.query_one("#explain-head")
        await wait_for(pilot, lambda: "No engine runs here" in str(head.render()))
        assert not app.query_one("#explain-nearest").display


def test_a_requirement_a_refusal_names_is_read_beside_what_is_installed():
    """cuDNN 9.19 on a Hopper GPU: a refusal that needs cuDNN 9.21 is not met on the backend's
    row; one that needs Blackwell is not met on the GPU's."""
    import dataclasses

    from tui.app.widgets.explain import versions_table
    from tui.engine.explain import requirement
    from tui.model.results import Environment

    h200 = Environment(gpu_available=True, gpu_name="NVIDIA H200", compute_capability="9.0",
                       cudnn_backend_version="9.19.0")  # fmt: skip
    needs = (requirement("cuDNN 9.21.0", "requires cuDNN 9.21.0 or above", h200),
             requirement("Blackwell", "only supported on Blackwell architecture", h200))  # fmt: skip
    e = dataclasses.replace(EXPLAINED_D65, requirements=needs, gpu_note="")
    lines = [" ".join(line.split()) for line in text_of(versions_table(e)).splitlines()]
    assert "cuDNN backend 9.26.0 9.21.0 NOT met" in lines  # the recording's installed version, as it said
    assert any(line.startswith("GPU none") and line.endswith("Blackwell NOT met") for line in lines)
