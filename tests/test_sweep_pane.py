"""The Sweep pane: the form's configuration at every point of one or two varies, run one point at
a time through the app's engine client, each point a row (tui.jobs.sweep.point_row, as the CLI's) and a
line point in the chart, live; a bad vary names itself and starts nothing; Esc stops after the
point under way and keeps it; form edits wait for the end; the other panes keep the form's own
result; without a GPU the points run and the pane says what is missing."""

from __future__ import annotations

import importlib.util
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest
from fakes import NO_GPU, PEERS, FakeEngine, computed, crash, relabelled
from pilot_waits import status_text, wait_for
from textual.widgets import Input

from tui.app import make_app
from tui.app.commands import ExplorerCommands
from tui.app.widgets.sweep import decode_like, peak_lines, series
from tui.jobs.sweep import grid, parse_vary, point_row
from tui.model.config import SdpaConfig
from tui.model.statuses import STATUS_CPU_ONLY, STATUS_OK

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)
TIMED = ["cuDNN H", "FLASH", "CUDNN", "MATH", "Flex"]  # PEERS timed these on the H200


def pane(app):
    return app.query_one("#sweep")


def table_rows(app) -> list[list[str]]:
    """Each row's cells, those of the columns a narrow pane leaves out too."""
    return [[str(cell) for cell in row] for row in app.query_one("#sweep-table").every_row]


def text(app, selector: str) -> str:
    return str(app.query_one(selector).render())


async def sweep(pilot, first: str, second: str = "") -> None:
    """Show the Sweep pane, type the varies and press Enter in the first, as a user would."""
    app = pilot.app
    await pilot.press("alt+9")
    await wait_for(pilot, lambda: app.query_one("#tabs").active == "tab-sweep")
    app.query_one("#sweep-vary-2", Input).value = second
    app.query_one("#sweep-vary-1", Input).value = first
    app.query_one("#sweep-vary-1", Input).focus()
    await pilot.press("enter")


def finished(app):
    return lambda: bool(pane(app).progress.finished)


def form_result_in(app, fake: FakeEngine):
    return lambda: app.result is not None and not fake.busy and not app.run_pending


@asynccontextmanager
async def dashboard(config: SdpaConfig, fake: FakeEngine):
    """The dashboard on `fake`, once the form's own first result is in."""
    app = make_app(config, client=fake)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, form_result_in(app, fake))
            yield pilot
    finally:
        fake.close()


@pytest.mark.asyncio
async def test_a_bad_vary_is_said_then_points_run_one_at_a_time_as_rows_and_lines_and_leave_the_form_alone(
    tmp_path,
):
    """One start (a start is most of such a test's time): the checks of what were
    test_a_bad_vary_is_said_under_its_input_naming_it_and_nothing_starts, then those of
    test_points_run_one_at_a_time_arrive_as_rows_and_lines_and_leave_the_form_result_alone."""
    fake = FakeEngine(relabelled(PEERS))
    async with dashboard(PEERS.config, fake) as pilot:
        app = pilot.app
        # a bad vary is said under its input, naming it, and nothing starts
        cases = [
            ("s=1024..32768x2", "q=1,2", 2, "--vary q: unknown field"),
            ("s=4096..1024x2", "", 1, "--vary s: the range '4096..1024x2' runs backwards"),
            ("d=64,65000", "", 1, "--vary d:"),
            ("s=1024,2048", "s_q=1,2", 2, "--vary s_q: s_q is already varied by --vary s"),
            ("", "", 1, "vary: give FIELD=VALUES"),
        ]
        for first, second, where, words in cases:
            await sweep(pilot, first, second)
            await wait_for(
                pilot, lambda where=where: app.query_one(f"#sweep-error-{where}").has_class("-visible")
            )
            assert text(app, f"#sweep-error-{where}").startswith(words)
            other = 3 - where
            assert not app.query_one(f"#sweep-error-{other}").has_class("-visible")
            assert not app.sweeps.running and len(fake.requests) == 1 and pane(app).rows == []
        assert not app.query_one("#sweep-table").display  # no sweep yet: no table, no chart
        await sweep(pilot, "s=1024,2048")  # fixed: the problem goes, the sweep runs
        await wait_for(pilot, finished(app))
        assert not app.query_one("#sweep-error-1").has_class("-visible") and len(pane(app).rows) == 2

        # points run one at a time, arrive as rows and lines, and leave the form's result alone
        form_result = app.result
        await sweep(pilot, "s=1024,2048")
        await wait_for(pilot, lambda: len(fake.requests) == 5 and finished(app)())
        base = PEERS.config
        points = [base.replace(s_q=s, s_kv=s) for s in (1024, 2048)]
        # the form's run, the points of the sweep above, then each point
        assert [config for config, _ in fake.requests] == [base, *points, *points]
        assert fake.overtaken == 0  # never a point asked for while another was unanswered
        assert all(options == fake.requests[0][1] for _, options in fake.requests)  # the form's options
        assert text(app, "#sweep-status").startswith("done: 2 of 2 points in ")
        rows = table_rows(app)
        assert [row[:7] for row in rows] == [  # the CLI's "63% compute, 3277/206 F/B", a column each
            ["1024", "OK", "877.29 µs", "626.7", "63%", "compute", "3277/206"],
            ["2048", "OK", "877.29 µs", "626.7", "63%", "compute", "3277/206"],
        ]
        assert rows[0][7] == "1.95x"  # cuDNN's speed against FLASH, the first peer that ran
        assert text(app, "#sweep-below").startswith("peer columns: cuDNN's speed against each")
        expected = [
            point_row(p, replace(PEERS, config=p.config))
            for p in grid(base, [parse_vary("s=1024,2048", base)])
        ]
        assert pane(app).rows == expected  # the CLI's rows, to the last figure
        assert list(pane(app).lines) == TIMED and pane(app).lines["Flex"] == [
            (1, pytest.approx(387.64, abs=0.01)),
            (2, pytest.approx(387.64, abs=0.01)),
        ]
        assert "forward TFLOPS by s" in app.query_one("#sweep-chart").plt.build()
        legend = text(app, "#sweep-legend")  # a colour a line, named; the peak's too
        assert legend.startswith(
            "━━ cuDNN H  ━━ FLASH  ━━ CUDNN  ━━ MATH  ━━ Flex  ━━ peak 989.5 (H200 SXM bf16)"
        )
        assert text(app, "#sweep-unrun").startswith("EFFICIENT ran at no point: For dense input")
        assert [row[-1] for row in rows] == ["cuDNN H", "cuDNN H"]  # the fastest way at each point
        assert "fastest: cuDNN H at 2 points" in legend
        if importlib.util.find_spec("matplotlib"):  # Save chart: the chart `sweep --plot` writes
            words, ok = pane(app).save_chart(str(tmp_path / "s.svg"))
            assert (
                ok and words.startswith("wrote the chart to ") and "FLASH" in (tmp_path / "s.svg").read_text()
            )
        assert not app.query_one("#sweep-note").display  # kernel times were taken: nothing is missing
        assert app.result is form_result and app.query_one("#summary").render() is not None
        assert base.label() in text(app, "#summary")  # the headline is the form's, not a point's
        assert status_text(app) == f"{STATUS_OK} in {PEERS.wall_seconds:.2f} s"
        commands = {name: help_text for name, _, help_text in ExplorerCommands(app.screen)._commands()}
        assert (
            commands["Pane: Sweep"] == "show the Sweep pane (Alt+9)"
        )  # last: the other panes keep their keys

        await sweep(pilot, "s=1024,2048", "d=64,128")  # two varies: a line per value of the second
        await wait_for(pilot, lambda: len(pane(app).rows) == 4 and finished(app)())
        assert fake.overtaken == 0 and len(fake.requests) == 9
        assert [r["varied"] for r in pane(app).rows] == [
            {"s": s, "d": d} for s in (1024, 2048) for d in (64, 128)
        ]
        assert list(pane(app).lines)[:2] == ["cuDNN H d=64", "cuDNN H d=128"]
        assert "⠒⠒ d=64  •• d=128" in text(app, "#sweep-legend")  # a marker a value of the second
        assert pane(app).lines["FLASH d=128"] == [
            (1, pytest.approx(320.6, abs=0.1)),
            (2, pytest.approx(320.6, abs=0.1)),
        ]
        assert [row[:2] for row in table_rows(app)] == [
            ["1024", "64"],
            ["1024", "128"],
            ["2048", "64"],
            ["2048", "128"],
        ]


@pytest.mark.asyncio
async def test_esc_stops_after_the_point_under_way_form_edits_wait_and_a_sweep_waits_for_the_forms_run():
    """Esc stops after the point under way and keeps it, and form edits wait for the end; then, in
    the same app (a start is most of such a test's time), what was
    test_a_sweep_waits_for_the_forms_run_and_a_point_that_kills_the_engine_is_a_row."""
    fake = FakeEngine(relabelled(PEERS))
    async with dashboard(SMALL, fake) as pilot:
        app = pilot.app
        fake.hold()  # each result waits for the test
        await sweep(pilot, "s=32..128x2")
        await wait_for(
            pilot, lambda: len(fake.requests) == 2 and "running s=32" in text(app, "#sweep-status")
        )
        assert text(app, "#sweep-status").startswith("0 of 3 points done, ")
        assert status_text(app).startswith("sweep 0 of 3 done, running s=32: form edits wait for its end")
        app.query_one("#f-b", Input).value = "2"  # an edit while the sweep runs: it waits
        await wait_for(pilot, lambda: app.form.read()[0] == SMALL.replace(b=2))
        assert not app.run_pending
        await pilot.press("escape")
        await wait_for(pilot, lambda: "stopping after s=32" in text(app, "#sweep-status"))
        fake.release()
        await wait_for(pilot, finished(app))
        assert [r["varied"] for r in pane(app).rows] == [{"s": 32}]  # the point under way is kept
        assert text(app, "#sweep-status").startswith("stopped (Esc): 1 of 3 points in ")
        await wait_for(pilot, lambda: app.result.config == SMALL.replace(b=2) and not fake.busy)
        configs = [config for config, _ in fake.requests]  # the form, one point, the edited form
        assert configs == [SMALL, SMALL.replace(s_q=32, s_kv=32), SMALL.replace(b=2)] and fake.overtaken == 0

        fake.hold()  # Esc twice: the point under way is stopped too, and dropped
        await sweep(pilot, "s=32..128x2")
        await wait_for(pilot, lambda: "running s=32" in text(app, "#sweep-status"))
        await pilot.press("escape", "escape")
        fake.release()
        await wait_for(pilot, finished(app))
        assert pane(app).rows == [] and text(app, "#sweep-status").startswith("stopped (Esc twice)")
        assert app.result.config == SMALL.replace(b=2) and len(fake.requests) == 4

        # a sweep waits for the form's run, and a point that kills the engine is a row
        fake.hold()
        runs = len(fake.requests)
        app.query_one("#f-b", Input).value = "3"  # the form's run, under way when the sweep is asked
        await wait_for(pilot, lambda: app.status.state.step.startswith("timing"))  # its answer is chosen
        fake.then(crash())  # the sweep's first point kills the engine process
        await sweep(pilot, "s=32,64")
        await wait_for(
            pilot, lambda: "waiting for the form's own run to finish" in text(app, "#sweep-status")
        )
        assert len(fake.requests) == runs + 1  # the point waits: asked now, it would drop the form's run
        fake.release()
        await wait_for(pilot, finished(app))
        assert app.result.config == SMALL.replace(b=3) and fake.overtaken == 0
        rows = table_rows(app)
        assert [row[:2] for row in rows] == [["32", "CRASHED"], ["64", "OK"]]
        said = "s=32: the engine process died (SIGSEGV, a crash in native code)"
        assert said in text(app, "#sweep-below")  # under the table, whole
        assert fake.restarts == 1 and app.result.config == SMALL.replace(b=3)  # the form's, still


@pytest.mark.asyncio
async def test_without_a_gpu_the_points_run_and_the_pane_says_kernel_times_need_one(cpu_engine):
    fake = FakeEngine(computed(cpu_engine), environment=NO_GPU)
    async with dashboard(SMALL, fake) as pilot:
        app = pilot.app
        await sweep(pilot, "s=32,64")
        await wait_for(pilot, finished(app))
        assert [row[:3] for row in table_rows(app)] == [["32", "CPU ONLY", "-"], ["64", "CPU ONLY", "-"]]
        assert [r["status"] for r in pane(app).rows] == [STATUS_CPU_ONLY] * 2
        assert text(app, "#sweep-note").startswith("Kernel times need a GPU (CPU mode requested by the test)")
        assert pane(app).lines == {} and not app.query_one("#sweep-chart").display  # no empty frame
        assert not app.query_one("#sweep-legend").display


def test_decode_shapes_are_read_in_tb_per_s_and_an_unknown_gpu_has_no_peak():
    base = PEERS.config.replace(s_q=1)
    points = grid(base, [parse_vary("s_kv=1024,2048", base)])
    rows = [point_row(p, replace(PEERS, config=p.config)) for p in points]
    assert decode_like(rows)
    lines = series(rows, ["s_kv"], ["1024", "2048"], decode=True)
    pick = PEERS.forward.bandwidth_gbs / 1000
    assert lines[("cuDNN H", "")] == [(1, pytest.approx(pick)), (2, pytest.approx(pick))]
    flash = PEERS.forward.io_bytes / PEERS.forward.field_peers[0].timing.median_us / 1e6
    assert lines[("FLASH", "")][0] == (1, pytest.approx(flash))
    assert peak_lines(rows, decode=True) == ({"peak 4.8 TB/s (H200 SXM)": 4.8}, "")
    assert peak_lines([{**r, "gpu": "NVIDIA A10G"} for r in rows], decode=False) == (
        {},
        "peak unknown for NVIDIA A10G",
    )
