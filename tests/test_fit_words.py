"""Words that must be whole where they are shown, at 80x24 and 120x40 (test_fit.py reads every
pane for cut words; these read one widget's own rows of the screen, since the same words shown
elsewhere, in the headline or the refusals' list, are not it):

- the Explain grid of a configuration validate() accepts (the seed's, on a machine without a GPU):
  every heuristic mode's name and every cell's words, in view, none scrolled off at the edge;
- the status line: the no-GPU reason beside the first run's step, and cuDNN's refusal beside the
  run's verdict and the pointer to Explain.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
from fakes import EXPLAINED_D65, EXPLAINED_SEED, REFUSAL, FakeEngine
from pilot_waits import show_pane, wait_for
from test_fit import SIZES, screen_text

from tui.app import make_app
from tui.app.widgets.status import EXPLAIN_HINT, RUNNING
from tui.model.results import Environment, RunResult
from tui.model.statuses import STATUS_UNSUPPORTED
from tui.present.explain import cell_text, numbered

NO_CUDA = Environment(gpu_available=False, unavailable_reason="no CUDA device is visible to torch")
CPU_STEP = "validating the forward and checking on the CPU"  # the CPU engine's words for its first step
WAIT_S = 20  # a screen that never shows the words says what it shows instead, soon


def rows_of(app, selector: str) -> list[str]:
    """The screen's lines at the widget's rows, within its columns."""
    r = app.query_one(selector).region
    return [line[r.x : r.right] for line in screen_text(app).splitlines()[r.y : r.bottom]]


async def shown(pilot, selector: str, wanted: Callable[[list[list[str]]], bool]) -> list[list[str]]:
    """The words of the widget's rows, each row's, once they are as `wanted` (or once the wait
    runs out, for the assertion to say what they are instead)."""

    def words() -> list[list[str]]:
        return [line.split() for line in rows_of(pilot.app, selector) if line.strip()]

    with contextlib.suppress(AssertionError):
        await wait_for(pilot, lambda: wanted(words()), timeout=WAIT_S)
    return words()


@pytest.mark.asyncio
async def test_the_explain_grid_of_a_valid_configuration_shows_every_mode_and_cell_whole():
    """At 120x40, then resized to 80x24 (one start: starts are dear)."""
    e = EXPLAINED_SEED
    app = make_app(e.config, client=FakeEngine(environment=NO_CUDA))
    async with app.run_test(size=SIZES[0]) as pilot:
        await show_pane(pilot, "explain")
        pane = app.query_one("#explain")
        await wait_for(pilot, lambda: pane.explanation == e)
        cells = app.query_one("#explain-cells")
        numbers = numbered(e)
        for size in SIZES:
            await pilot.resize_terminal(*size)
            short = size == (80, 24)  # in words where they fit: 120 columns
            await wait_for(
                pilot, lambda size=size, short=short: app.size == size and pane.grid_short == short
            )
            label = str(next(iter(cells.columns.values())).label)  # the grid's, as wide as it fits
            wanted = [[label, *e.modes]] + [
                [
                    impl,
                    *(w for m in e.modes for w in cell_text(e.cell(impl, m), numbers, short).plain.split()),
                ]
                for impl in e.implementations
            ]
            assert await shown(pilot, "#explain-cells", lambda words, w=wanted: words == w) == wanted, size
            assert cells.virtual_size.width <= cells.size.width, (size, cells.virtual_size, cells.size)
            if not short:
                assert wanted[1][1:3] == ["✓", "validate()"]


@pytest.mark.asyncio
async def test_the_status_line_shows_the_no_gpu_reason_and_a_refusal_whole_at_80x24():
    def first_run(reply, config, options) -> None:
        reply.progress(CPU_STEP)
        reply.result(RunResult(config=config, status=STATUS_UNSUPPORTED, message=REFUSAL, wall_seconds=0.05))

    fake = FakeEngine(first_run, environment=NO_CUDA)
    fake.hold()  # the first run stays at its step
    app = make_app(EXPLAINED_D65.config, client=fake)
    async with app.run_test(size=(80, 24)) as pilot:
        state = lambda: app.status.state  # noqa: E731
        await wait_for(pilot, lambda: state().phase in RUNNING and state().step == CPU_STEP)
        reason = f"no GPU: {NO_CUDA.unavailable_reason}"  # beside the step or under it, whole

        def step_and_reason(rows: list[list[str]]) -> bool:
            said = " ".join(w for row in rows for w in row)
            return said.startswith(f"{CPU_STEP} ...") and said.endswith(reason)

        rows = await shown(pilot, "#status", step_and_reason)
        assert step_and_reason(rows), rows
        fake.release()
        await wait_for(pilot, lambda: app.result is not None and not fake.busy)
        verdict = f"unsupported in 0.05 s ({EXPLAIN_HINT})".split()
        refusal = REFUSAL.split()  # "validate: hidden_dim should be multiple of 8": cuDNN's words whole
        rows = await shown(pilot, "#status", lambda rows: rows == [verdict, refusal])
        assert rows == [verdict, refusal]
