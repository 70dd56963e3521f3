"""The dashboard driven by Pilot on the CPU.

Most tests talk to a scripted engine (tests/fakes.py: recordings of the H200, the CPU engine in
this process, or a failure); a few keep the real engine process, told there is no GPU, for what
only it can show: start-up to a first result, a SIGKILL mid-run, quitting.
"""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest
import pytest_asyncio
from fakes import FP8, RECORDED, TRAINING, FakeEngine, crash, hang, refused, relabelled
from pilot_waits import click, show_pane, status_text, wait_for
from textual.widgets import Checkbox, Input, Label, Select

from tui.app import make_app
from tui.app.widgets.status import Phase, Status
from tui.model.config import SdpaConfig
from tui.model.options import RunOptions
from tui.model.statuses import STATUS_CPU_ONLY, STATUS_OK, STATUS_UNSUPPORTED
from tui.process.client import EngineProgress

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


async def set_field(pilot, app, name: str, value: str) -> None:
    app.query_one(f"#f-{name}", Input).value = value
    await pilot.pause()


def phase(app) -> Phase:
    return app.status.state.phase


def shown(app, config: SdpaConfig):
    """A predicate: the panes show a result for `config`."""
    return lambda: app.result is not None and app.result.config == config and phase(app) is Phase.DONE


@pytest_asyncio.fixture(scope="class", loop_scope="class")
async def form_app():
    """One dashboard without an engine, shared by the tests of a class (see `as_new`)."""
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        pilot.first_focus = app.focused
        yield pilot


async def as_new(pilot, config: SdpaConfig = SMALL):
    """The shared app as a new one made with `config` shows it: its main screen and first focus,
    `config` in the form and the timing section at its defaults, no notifications."""
    app = pilot.app
    while len(app.screen_stack) > 1:
        app.pop_screen()
    app.clear_notifications()
    app.query_one("#tabs").active = "tab-plans"
    app.set_focus(pilot.first_focus)
    app.form.load(config)
    app.form.load_options(RunOptions())
    await wait_for(
        pilot,
        lambda: (
            app.form.read() == (config, {})
            and app.form.options == RunOptions()
            and app.mask_config[0] == config
            and phase(app) is not Phase.STALE
        ),
    )
    await pilot.pause()
    return pilot


# ---- the real engine process ------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_engine_process_survives_a_kill_checks_on_the_cpu_and_stops_on_quit(engine_process):
    """One engine's life: killed mid-run (the run is reported lost, the form kept, the process
    replaced), then a run on the new process, then quitting ends it. The kill comes as the run
    reports its first step, before the app hears of it: mid-run however fast the run is."""
    killed: list[int] = []
    start = engine_process.start

    def start_with_a_kill(on_event):
        def on_event_kill_first(event):
            if isinstance(event, EngineProgress) and not killed:
                killed.append(engine_process.pid)
                os.kill(engine_process.pid, signal.SIGKILL)
            on_event(event)

        start(on_event_kill_first)

    engine_process.start = start_with_a_kill
    app = make_app(SMALL, client=engine_process)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: killed, timeout=120)
        first_pid = killed[0]
        await wait_for(pilot, lambda: app.status.state.restart_reason != "")
        assert phase(app) is Phase.ERROR and app.result is None  # the run died with the process
        assert "engine restarted: the engine process died (SIGKILL" in status_text(app)
        assert engine_process.pid != first_pid and engine_process.restarts == 1
        assert app.form.read()[0] == SMALL  # the form is as the user left it
        await pilot.press("ctrl+r")  # as the status line advises
        await wait_for(pilot, shown(app, SMALL), timeout=120)
        assert app.status.state.restart_reason == "" and "engine restarted" not in status_text(app)
        assert app.result.status == STATUS_CPU_ONLY
        assert "no GPU: CPU mode requested by the test" in status_text(app)
        await show_pane(pilot, "environment")
        env_rows = [str(app.query_one("#environment").get_row_at(i)[0]) for i in range(3)]
        assert "GPU unavailable" in env_rows
        pid = engine_process.pid
        await pilot.press("ctrl+q")
    with pytest.raises(ProcessLookupError):  # closing the app ended (and reaped) its engine
        os.kill(pid, 0)


def test_the_dashboard_warms_the_engine_server_only_for_an_engine_of_its_own(monkeypatch):
    """Made to start its own engine, the dashboard starts the fork server at once (torch loads while
    it imports and paints); with an engine handed to it, or none to start, it starts nothing."""
    from tui.process import launcher

    warmed = []
    monkeypatch.setattr(launcher, "warm", lambda: warmed.append(True))
    make_app(SMALL, start_engine=False)
    make_app(SMALL, client=FakeEngine())
    assert not warmed
    make_app(SMALL)
    assert warmed == [True]


@pytest.mark.asyncio
async def test_the_engine_starts_with_the_app_and_runs_the_form_once_the_first_frame_is_on_screen(
    fake_engine, monkeypatch
):
    """The engine process starts as the app does (forked from a warm engine server, it is ready
    about when the first frame is); the form runs once that frame is on screen (its CPU goes to
    the first layout passes otherwise), and what the engine said meanwhile is shown then."""
    from textual.screen import Screen

    frames, started, submitted = [], [], []
    paint, start, submit = Screen._compositor_refresh, fake_engine.start, fake_engine.submit
    monkeypatch.setattr(Screen, "_compositor_refresh", lambda screen: (frames.append(1), paint(screen)))
    monkeypatch.setattr(fake_engine, "start", lambda on_event: (started.append(len(frames)), start(on_event)))
    monkeypatch.setattr(fake_engine, "submit", lambda *a: (submitted.append(len(frames)), submit(*a))[1])
    app = make_app(SMALL, client=fake_engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        assert app.environment is not None and app.status.state.startup_s is not None  # ready, shown
    assert started == [0] and submitted[0] >= 1 and fake_engine.requests


# ---- a scripted engine --------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_no_gpu_mode_explains_itself_checks_reruns_an_edit_and_a_training_step(cpu_fake_engine):
    """The CPU engine's results (the engine's own code, in this process): the first says why there
    is no GPU; an edit reruns and updates the panes; with the backward pass turned on, the backward
    graph is still defined and validated, and torch's own backward is checked against fp32
    autograd on the CPU. In the same app (a start is most of such a test's time), the checks of
    what were test_dashboard_hand.py's test_without_a_gpu_the_latency_pane_says_why_it_is_empty
    (the first result's Latency pane says why it is empty) and the first half of
    test_peers_pane.py's test_without_a_gpu_the_ticked_peers_are_said_not_run_and_a_saved_result_ticks_its_own
    (a peer ticked is said not run)."""
    app = make_app(SMALL, client=cpu_fake_engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, shown(app, SMALL))
        assert app.result.status == STATUS_CPU_ONLY
        assert status_text(app).startswith("cpu only in ")  # the status in words, as the headline says it
        assert "no GPU: CPU mode requested by the test" in status_text(app)
        (o,) = app.result.forward.checks
        assert o.cudnn is None and o.peers["torch FLASH fp16"].mismatched == 0
        await show_pane(pilot, "latency")  # without a GPU the Latency pane says why it is empty
        (words,) = (t.plain for t in app.query_one("#latency-gpu").content.renderables)
        assert "no kernel times: there is no usable GPU here (CPU mode requested by the test)" in words
        headline = str(app.query_one("#summary").render())
        assert headline.startswith("CPU ONLY  b1 h2")  # the verdict first: 80 columns never split it
        # editing a field reruns and updates the panes
        await set_field(pilot, app, "s_q", "32")
        await wait_for(pilot, shown(app, SMALL.replace(s_q=32)))
        assert app.result.config == SMALL.replace(s_q=32)
        summary = str(app.query_one("#summary").render())
        assert "s32x64" in summary
        await show_pane(pilot, "phases")
        assert app.query_one("#phases-forward").row_count == 2  # define, validate
        assert [config for config, _ in cpu_fake_engine.requests] == [SMALL, SMALL.replace(s_q=32)]
        # a training step
        app.query_one("#f-backward", Checkbox).value = True
        await wait_for(pilot, shown(app, SMALL.replace(s_q=32, backward=True)))
        b = app.result.pass_of("backward")
        assert b is not None and b.status == "cpu_only" and [c.output for c in b.checks] == ["dQ", "dK", "dV"]
        assert app.query_one("#phases-backward").display
        assert app.query_one("#phases-backward").row_count == len(b.phases) == 2
        assert "backward graph: total" in str(app.query_one("#phases-backward-head").render())
        await show_pane(pilot, "accuracy")  # hidden when the result came: drawn when shown
        checks = app.query_one("#accuracy-table")
        rows = [[str(c) for c in row] for row in checks.every_row]  # a narrow pane's dropped columns too
        assert len(rows) == 8  # O, dQ, dK, dV: cuDNN's row, then torch's
        assert rows[2][:3] == ["backward", "dQ", "cuDNN"] and rows[2][-1] == "not run"  # cuDNN did not run
        assert rows[3][2] == "torch FLASH fp16" and rows[3][-1] == "pass"
        assert "cuDNN's backward did not run" in str(app.query_one("#accuracy-head").render())
        assert not app.query_one("#fp8-table").display
        await show_pane(pilot, "graph")
        assert "SDPA_BWD" in app.query_one("#graph-backward").content.code
        summary = str(app.query_one("#summary").render())
        assert "torch FLASH fp16 on the CPU, not cuDNN: dQ/dK/dV max abs err" in summary
        assert "PASS" not in summary  # a peer's verdict is not cuDNN's
        await pilot.press("f1")  # the help starts with what this machine can show, and why
        await wait_for(pilot, lambda: bool(app.screen.query("Markdown")))
        text = app.screen.query_one("Markdown").source
        assert text.index("no usable GPU (CPU mode requested by the test)") < text.index("## Without a GPU")
        assert text.index("## Without a GPU") < text.index("## Keys")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.screen.query("Markdown"))
        # a peer ticked is said not run (the first half of test_peers_pane.py's
        # test_without_a_gpu_the_ticked_peers_are_said_not_run_and_a_saved_result_ticks_its_own)
        app.query_one("#f-backward", Checkbox).value = False  # a forward, as that test ran
        app.query_one("#f-peer-math", Checkbox).value = True
        await wait_for(
            pilot,
            lambda: (
                shown(app, SMALL.replace(s_q=32))()
                and app.result.forward.field_peers != ()
                and not app.run_pending
            ),
        )
        assert cpu_fake_engine.requests[-1][1].peers == ("math",)
        await show_pane(pilot, "peers")
        words = str(app.query_one("#peers-head").render())
        assert words.startswith("Forward peers torch MATH fp16: not run: peers are timed on the GPU only")
        assert "(CPU mode requested by the test)" in words and not app.query_one("#peers-table").display
        assert "against peers" not in str(app.query_one("#summary").render())


@pytest.mark.asyncio
async def test_a_run_before_the_engine_starts_waits_the_status_follows_each_step_a_bad_value_runs_nothing(
    user_presets, fake_engine
):
    """The status line through a run asked before the engine started and an edit that does not
    validate while a run is under way; then, in the same app (a start is most of such a test's
    time), what was test_a_bad_value_shows_the_field_error_and_starts_no_run_then_a_preset_loads_and_runs:
    a field that does not validate stops runs until fixed; then the preset picker filters as you
    type, and Enter loads the preset and runs it."""
    app = make_app(SMALL, client=fake_engine, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_run()  # Ctrl+R, or a typing pause ending, before the engine has started
        assert fake_engine.requests == [] and phase(app) is Phase.STARTING
        fake_engine.hold()  # each result waits for the test
        app.start_engine()  # what the first frame does: starting runs the form
        await wait_for(pilot, lambda: phase(app) is Phase.TIMING)
        assert status_text(app).startswith("timing plan 1 of 1 ...")  # a second later it adds its time
        assert app.status.state.startup_s is not None  # ready came first, and did not hide the run
        fake_engine.release()
        await wait_for(pilot, shown(app, SMALL))
        assert [config for config, _ in fake_engine.requests] == [SMALL]
        assert status_text(app) == f"{STATUS_OK} in {RECORDED.wall_seconds:.2f} s"
        fake_engine.hold()
        await set_field(pilot, app, "s_q", "32")
        await wait_for(pilot, lambda: phase(app) is Phase.TIMING)
        await set_field(pilot, app, "h_kv", "3")  # a bad value while a run is under way
        await wait_for(pilot, lambda: phase(app) is Phase.STALE)
        fake_engine.release()  # the run for s_q=32 lands, for the last good configuration
        await wait_for(pilot, lambda: app.result.config.s_q == 32)
        assert phase(app) is Phase.STALE and app.query_one("#right").has_class("-stale")
        await set_field(pilot, app, "h_kv", "2")  # back to what just ran: nothing new to run
        await wait_for(pilot, lambda: phase(app) is Phase.DONE)
        assert not app.run_pending and len(fake_engine.requests) == 2

        # a bad value shows the field error and starts no run, then a preset loads and runs
        await set_field(pilot, app, "s_q", "64")
        await wait_for(pilot, shown(app, SMALL))
        runs = len(fake_engine.requests)
        shown_before = app.result
        await set_field(pilot, app, "h_kv", "3")
        await wait_for(pilot, lambda: phase(app) is Phase.STALE)
        error = app.query_one("#err-h_kv")
        assert "h_q must be a multiple of h_kv (got 2 and 3)" in str(error.render())
        assert error.has_class("-visible")
        assert app.query_one("#right").has_class("-stale")
        assert status_text(app).startswith(
            "not run: fix key/value heads (h_kv); the panes show the last good configuration"
        )
        assert not app.run_pending and not fake_engine.busy and app.result is shown_before
        await set_field(pilot, app, "b", "x")
        await wait_for(pilot, lambda: "b" in app.status.state.stale_fields)
        assert "whole number" in str(app.query_one("#err-b").render())
        await pilot.press("ctrl+r")
        assert phase(app) is Phase.STALE and status_text(app).startswith("not run: fix batch (b)")
        assert len(fake_engine.requests) == runs and not app.run_pending
        await set_field(pilot, app, "b", "1")
        await set_field(pilot, app, "h_kv", "1")
        await wait_for(pilot, shown(app, SMALL.replace(h_kv=1)))
        assert not app.query_one("#right").has_class("-stale")
        # the preset picker filters, loads and runs
        await pilot.press("ctrl+o")
        assert app.screen.__class__.__name__ == "PresetPicker"
        await pilot.press(*"bert")
        options = app.screen.query_one("#picker-list")
        assert options.option_count == 1 and options.get_option_at_index(0).id == "bert-base"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.result.config.s_q == 512)
        assert app.query_one("#f-b", Input).value == "8"
        assert app.result.config.causal == "none"


@pytest.mark.asyncio
async def test_a_crash_a_refusal_and_a_hang_are_each_reported_and_the_next_run_recovers(fake_engine):
    """The engine's failures in turn, each followed by a good run: a crash in the first run (no
    result yet, the form kept), cuDNN's refusal in its own words, a build that hangs."""
    fake_engine.then(crash())
    app = make_app(SMALL, client=fake_engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.status.state.restart_reason != "")
        assert phase(app) is Phase.ERROR and app.result is None
        assert status_text(app) == (
            "the form is as you left it; edit or press Ctrl+R to run again"
            "\nengine restarted: the engine process died (SIGSEGV, a crash in native code)"
        )  # too long for one row of 120 columns: the error on its own
        assert any("fresh engine process" in str(n.message) for n in app._notifications)
        assert fake_engine.restarts == 1 and app.form.read()[0] == SMALL
        await pilot.press("ctrl+r")
        await wait_for(pilot, shown(app, SMALL))
        assert app.status.state.error == ""
        # cuDNN's refusal is shown in its own words, and goes with the next good result
        fake_engine.then(refused())
        await set_field(pilot, app, "s_q", "32")
        await wait_for(pilot, shown(app, SMALL.replace(s_q=32)))
        assert app.result.status == STATUS_UNSUPPORTED
        assert (
            status_text(app)
            == f"{STATUS_UNSUPPORTED} in 0.05 s (why: Alt+0 Explain)   validate: hidden_dim should be multiple of 8"
        )
        assert fake_engine.explained == []  # the hint points to the pane; the pane, shown, asks
        await set_field(pilot, app, "s_q", "16")  # the next answer is a recording again: the error goes
        await wait_for(pilot, shown(app, SMALL.replace(s_q=16)))
        assert app.status.state.error == "" and status_text(app).startswith(STATUS_OK)
        # a hang is stopped and reported
        fake_engine.then(hang())
        await set_field(pilot, app, "s_q", "8")
        await wait_for(pilot, lambda: phase(app) is Phase.ERROR)
        assert "engine restarted: the engine was silent for more than 0.2 s and was stopped" in status_text(
            app
        )
        await set_field(pilot, app, "s_q", "48")
        await wait_for(pilot, shown(app, SMALL.replace(s_q=48)))


@pytest.mark.asyncio
async def test_a_saved_result_opens_runs_only_when_asked_and_is_not_kept_again(tmp_path, monkeypatch):
    """A saved result opened shows as it was and runs only when asked; with, in the same app (a
    start is most of such a test's time), what was test_history_pane.py's
    test_a_saved_result_opened_is_not_kept_again: the runs it leads to are kept, it is not."""
    from tui.app.widgets.history import HistoryPane
    from tui.store.history import History

    monkeypatch.setenv("SDPA_EXPLORER_DATA_DIR", str(tmp_path / "data"))  # a run history of its own
    fake = FakeEngine(relabelled(RECORDED))
    app = make_app(client=fake, opened=TRAINING)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            # the engine is ready, and the form's own changes as the result was loaded are handled
            await wait_for(pilot, lambda: app.status.state.startup_s is not None and not app.run_pending)
            assert app.result is TRAINING and app.form.read()[0] == TRAINING.config
            assert app.form.options.timing.regime == "sustained"  # Ctrl+R measures it as it was measured
            assert TRAINING.config.label() in str(app.query_one("#summary").render())
            assert app.mask_config[0] == TRAINING.config
            assert status_text(app) == f"{STATUS_OK} in {TRAINING.wall_seconds:.2f} s"
            assert (
                fake.requests == []
                and not app.run_pending
                and not app.query_one("#right").has_class("-stale")
            )
            await show_pane(pilot, "history")  # made now: what the dashboard keeps from here on
            history = app.query_one(HistoryPane)
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: fake.requests and phase(app) is Phase.DONE)
            assert [config for config, _ in fake.requests] == [TRAINING.config]
            assert fake.requests[0][1].timing.regime == "sustained"
            await set_field(pilot, app, "b", "2")  # an edit runs too
            await wait_for(pilot, shown(app, TRAINING.config.replace(b=2)))
            assert len(fake.requests) == 2
            # the two runs are kept, newest first; the saved result is not kept again
            await wait_for(pilot, lambda: len(history.rows) == 2)
            assert [row.label for row in history.rows] == [
                TRAINING.config.replace(b=2).label(),
                TRAINING.config.label(),
            ]
            with History() as kept:
                assert kept.count() == 2
    finally:
        fake.close()


def test_the_status_line_says_each_state_in_words():
    """The words are the status line's alone: a state renders the same wherever it is set."""
    start = Status()
    assert start.phase is Phase.STARTING and start.render().plain.startswith("starting the engine process")
    ready = start.ready(4.24, "no CUDA device")
    assert ready.render().plain == "engine ready in 4.2 s   no GPU: no CUDA device"
    queued = ready.queued("b1 h2/2 s64x64 d64")
    assert queued.phase is Phase.QUEUED and queued.now == "queued b1 h2/2 s64x64 d64 ..."
    steps = [queued.working(w).phase for w in ("building the forward", "checking the backward: autograd 40%")]
    assert steps == [Phase.BUILDING, Phase.CHECKING]
    timing = queued.working("timing plan 3 of 6")
    assert timing.phase is Phase.TIMING and timing.now.startswith("timing plan 3 of 6 ...")
    done = timing.shown(STATUS_OK, "", 0.123, "")
    assert done.phase is Phase.DONE and done.render().plain == "ok in 0.12 s"
    stale = done.stale(("h_kv", "b"))
    assert (
        stale.now
        == "not run: fix batch (b), key/value heads (h_kv); the panes show the last good configuration (stale)"
    )
    assert Status().stale(("b",)).now == "not run: fix batch (b)"  # nothing on screen yet to call stale
    assert stale.working("timing plan 1 of 1").phase is Phase.STALE  # the run goes on underneath
    assert stale.settled().phase is Phase.DONE
    died = timing.restarted("the engine process died (SIGKILL, a crash in native code)")
    assert died.phase is Phase.ERROR and died.error.startswith("engine restarted: ")
    assert died.ready(3.0, "").phase is Phase.ERROR  # the fresh engine keeps the advice on screen
    refusal = died.shown(STATUS_UNSUPPORTED, "validate: hidden_dim should be multiple of 8", 0.05, "")
    assert refusal.error == "validate: hidden_dim should be multiple of 8"  # the restart is history
    assert refusal.shown(STATUS_OK, "", 0.1, "no CUDA device").error == "no GPU: no CUDA device"
    assert done.preset_loaded("bert-base", "BERT base").now == "preset bert-base: BERT base"


class TestTheFormWithoutAnEngine:
    """The form, its dialogs and the palette's commands, without an engine: the tests share one
    app (a dashboard start-up is most of such a test's time), set back as a new one shows it
    before each test."""

    pytestmark = pytest.mark.asyncio(loop_scope="class")

    async def test_focus_moves_repaint_little_keep_the_footer_and_alt_digits_reach_the_panes_or_a_dialog(
        self, form_app, monkeypatch
    ):
        """What was test_dashboard_hand.py's test of the same name (its own start without an
        engine), the checks of what were these tests, in turn:
        - test_a_focus_move_repaints_the_fields_it_changes_not_the_whole_screen;
        - test_a_tab_between_fields_keeps_the_footer_and_a_pane_with_keys_of_its_own_redraws_it:
          moving focus between fields whose keys are the same rebuilds nothing (a Tab used to
          rebuild every key and lay the screen out again); focus that brings keys of its own does;
        - test_alt_digit_as_most_terminals_send_it_reaches_the_panes_and_is_typed_in_a_dialog:
          xterm, GNOME Terminal and tmux send Alt+3 as ESC 3, which Textual reads as "£" (macOS's
          Option+3): in a field of the main screen it shows a pane, never lands in the field; in
          the save-preset dialog it is typed (a name or description may hold a "£"). The keys go
          in as the terminal's driver posts them, with their characters."""
        from textual import events
        from textual._compositor import Compositor
        from textual.keys import _character_to_key
        from textual.widgets import TabbedContent
        from textual.widgets._footer import FooterKey

        from tui.app.widgets.keys import KeysFooter

        pilot = await as_new(form_app)
        app = pilot.app
        full: list[int] = []
        whole = Compositor.render_full_update

        def counted(compositor, *args, **kwargs):
            full.append(1)
            return whole(compositor, *args, **kwargs)

        def sent(char: str) -> None:
            app.post_message(events.Key(_character_to_key(char), char))

        def keys_of(footer) -> list[str]:
            return [key.description for key in footer.query(FooterKey)]

        # a focus move repaints the fields it changes, not the whole screen
        await wait_for(pilot, lambda: app.query_one("#f-b").has_focus)
        await pilot.pause()
        footer = app.query_one(KeysFooter)
        await wait_for(pilot, lambda: len(footer.query(FooterKey)) > 0)
        drawn = list(footer.query(FooterKey))
        monkeypatch.setattr(Compositor, "render_full_update", counted)
        for field in ("#f-h_q", "#f-s_q", "#f-b"):
            app.query_one(field).focus()
            await wait_for(pilot, lambda field=field: app.query_one(field).has_focus)
        assert full == [], "a focus move between fields repainted the whole screen"
        monkeypatch.setattr(Compositor, "render_full_update", whole)

        # a Tab between fields keeps the footer; a pane with keys of its own redraws it
        assert list(footer.query(FooterKey)) == drawn and all(key.is_attached for key in drawn), (
            "a focus move between fields rebuilt the footer"
        )
        await pilot.press("f3")
        app.query_one("#search-table").focus()
        await wait_for(pilot, lambda: "Pin best" in keys_of(footer))
        app.query_one("#f-b").focus()
        await wait_for(pilot, lambda: "Pin best" not in keys_of(footer))
        assert keys_of(footer) == [key.description for key in drawn], "the form's keys again"

        # Alt+digit as most terminals send it reaches the panes, and is typed in a dialog
        field = app.query_one("#f-b")
        field.focus()
        tabs = app.query_one(TabbedContent)
        for char, pane in (("£", "tab-phases"), ("™", "tab-peers"), ("ª", "tab-sweep")):
            sent(char)
            await wait_for(pilot, lambda pane=pane: tabs.active == pane)
        assert field.value == "1" and app.focused is field, "an Alt+digit landed in the field"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(app.screen.query("#save-name")))
        sent("£")
        await wait_for(pilot, lambda: app.screen.query_one("#save-name").value == "£")
        assert tabs.active == "tab-sweep", "the dialog's key was typed, no pane moved"

    async def test_help_and_palette_commands(self, form_app, user_presets):
        from tui.app.commands import ExplorerCommands

        pilot = await as_new(form_app)
        app = pilot.app
        names = [name for name, _cb, _help in ExplorerCommands(app.screen)._commands()]
        assert "Preset: gpt2-seed" in names and "Export ..." in names and "Layout: SBHD" in names
        everything = names + [c.title for c in app.get_system_commands(app.screen)]
        assert len(everything) == len(set(everything)), "the palette lists a command twice"
        await pilot.press("f1")
        assert app.screen.__class__.__name__ == "HelpScreen"
        await pilot.press("escape")
        app.set_layout("SBHD")
        await pilot.pause()
        assert app.query_one("#f-layout").value == "SBHD"
        app.action_toggle_causal()
        await pilot.pause()
        assert app.query_one("#f-causal").value == "none"
        config, errors = app.form.read()
        assert errors == {} and config.layout == "SBHD" and config.causal == "none"

    async def test_save_preset_asks_before_overwriting_and_keeps_the_regime(self, form_app, user_presets):
        pilot = await as_new(form_app)
        app = pilot.app
        app.query_one("#f-regime", Select).value = "sustained"
        await pilot.press("ctrl+s")
        await pilot.press(*"tiny", "enter")
        await pilot.pause()
        assert (user_presets / "tiny.toml").exists() and "tiny" in app.presets
        assert app.presets["tiny"].config == SMALL and app.presets["tiny"].regime == "sustained"
        app.query_one("#f-regime", Select).value = "burst"
        app.keeping.load_preset(app.presets["tiny"])  # a preset that names its regime sets the form's
        assert app.form.options.timing.regime == "sustained"
        await set_field(pilot, app, "b", "3")
        await pilot.press("ctrl+s")
        await pilot.press(*"tiny", "enter")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "Confirm"
        await click(pilot, "#confirm-yes")
        await pilot.pause()
        assert app.presets["tiny"].config.b == 3

    async def test_export_writes_a_script_and_says_where(self, form_app, tmp_path):
        pilot = await as_new(form_app)
        app = pilot.app
        await pilot.press("ctrl+e")
        assert app.screen.__class__.__name__ == "ExportDialog"
        target = tmp_path / "repro.py"
        app.screen.query_one("#export-path", Input).value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        text = target.read_text()
        compile(text, str(target), "exec")
        assert "\nB, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = 1, 2, 2, 64, 64, 64, 64\n" in text  # its sizes
        assert any(str(target) in str(n.message) for n in app._notifications)

    async def test_mask_fields_reach_the_config_and_the_mask_view(self, form_app):
        pilot = await as_new(form_app)
        app = pilot.app
        await set_field(pilot, app, "window", "16")
        await set_field(pilot, app, "seq_lens_q", "ratio 0.5")
        config, errors = app.form.read()
        assert errors == {}
        assert config.window == 16 and config.seq_lens_q == (32,) and config.seq_lens_kv == (64,)
        assert app.mask_config[0] == config
        await show_pane(pilot, "mask")  # drawn when shown, and while shown at each edit
        assert app.query_one("#mask").config == config
        await set_field(pilot, app, "window", "8")
        assert app.query_one("#mask").config == config.replace(window=8)
        await set_field(pilot, app, "seq_lens_kv", "1,2,3")
        assert "one length per batch entry" in str(app.query_one("#err-seq_lens_kv").render())
        app.form.load(SMALL.replace(alibi=True, bias="bxh", window=8))
        await pilot.pause()
        config, _ = app.form.read()
        assert (config.alibi, config.bias, config.window) == (True, "bxh", 8)

    async def test_a_paged_cache_shows_its_page_table_and_packed_tokens_what_they_save(self, form_app):
        """The table the form's runs read (their seed, 0), the selected batch entry's sequence
        among the rows shown; THD adds what packing saves; a dense BSHD batch shows neither."""
        from tui.engine.storage import page_table

        pilot = await as_new(form_app)
        app = pilot.app
        paged = SdpaConfig(b=40, h_q=4, h_kv=2, s_q=1, s_kv=1024, causal="bottom_right", page_size=64)
        app.form.load(paged)
        await wait_for(pilot, lambda: app.mask_config[0] == paged)
        await show_pane(pilot, "mask")
        assert app.query_one("#mask").config == paged
        view = app.query_one("#mask-storage")
        table = page_table(paged, app.live_options(app.form.options).seed)

        def row(i: int) -> list[str]:
            return next(
                (
                    line.split()[2:]
                    for line in str(view.render()).splitlines()
                    if line.startswith(f"seq {i} ")
                ),
                [],
            )

        await wait_for(pilot, lambda: view.display and row(0)[:4] == [str(p) for p in table[0][:4]])
        assert "pages of 64 tokens, 16 a sequence, shuffled (seed 0)" in " ".join(str(view.render()).split())
        assert not row(39)  # 40 sequences: the pane shows the first ones
        app.query_one("#mask-batch", Select).value = 39
        await wait_for(pilot, lambda: row(39)[:4] == [str(p) for p in table[39][:4]])
        packed = SMALL.replace(b=2, layout="THD", seq_lens_q=(64, 16), seq_lens_kv=(64, 16))
        app.form.load(packed)
        await wait_for(pilot, lambda: str(view.render()).startswith("packed: "))
        assert "(38% saved)" in str(view.render()) and "page table" not in str(view.render())
        app.form.load(SMALL)
        await wait_for(pilot, lambda: not view.display)
        app.query_one("#tabs").active = "tab-plans"

    async def test_training_fields_reach_the_config_and_load_from_a_preset(self, form_app):
        pilot = await as_new(form_app)
        app = pilot.app
        app.query_one("#f-dtype", Select).value = "fp8_e4m3"
        app.query_one("#f-out_dtype", Select).value = "fp8_e4m3"
        app.query_one("#f-backward", Checkbox).value = True
        app.query_one("#f-deterministic", Checkbox).value = True
        await pilot.pause()
        config, errors = app.form.read()
        assert errors == {}
        assert (config.dtype, config.out_dtype, config.backward, config.deterministic) == (
            "fp8_e4m3",
            "fp8_e4m3",
            True,
            True,
        )
        assert app.mask_config[0] == config  # the ConfigEdited the form posted carried it
        assert not app.query_one("#right").has_class("-stale")
        app.form.load(SMALL)
        await pilot.pause()
        assert app.form.read()[0] == SMALL
        preset = SMALL.replace(dtype="fp8_e4m3", backward=True, deterministic=True)
        app.form.load(preset)
        await pilot.pause()
        assert app.form.read()[0] == preset and app.query_one("#f-backward", Checkbox).value is True

    async def test_deterministic_without_backward_shows_the_field_error(self, form_app):
        pilot = await as_new(form_app, SMALL.replace(backward=True))
        app = pilot.app
        app.query_one("#f-deterministic", Checkbox).value = True
        await pilot.pause()
        assert app.form.read()[0].deterministic is True
        app.action_toggle_backward()  # the palette's command
        await pilot.pause()
        error = app.query_one("#err-deterministic")
        assert "turn the backward pass on" in str(error.render()) and error.has_class("-visible")
        assert app.query_one("#f-deterministic").has_class("-invalid")
        assert app.query_one("#right").has_class("-stale")
        app.query_one("#f-out_dtype", Select).value = "bf16"  # fp16 inputs cannot choose their output
        await pilot.pause()
        assert "only FP8 inputs may choose" in str(app.query_one("#err-out_dtype").render())

    async def test_an_edit_rewrites_only_the_problem_lines_whose_words_change(self, form_app, monkeypatch):
        """A Label's update lays the whole screen out: the form's lines (a field's problem, the
        known issues, the problems of no one field) are said again only when their words change."""
        pilot = await as_new(form_app)
        app = pilot.app
        said: list[str] = []
        update = Label.update
        monkeypatch.setattr(
            Label, "update", lambda line, *a, **k: (said.append(line.id), update(line, *a, **k))
        )
        await set_field(pilot, app, "s_kv", "32")  # valid edits: every line stays as it is
        await set_field(pilot, app, "s_kv", "64")
        assert said == []
        await set_field(pilot, app, "s_q", "-1")  # a problem under the field, then gone again
        await set_field(pilot, app, "s_q", "64")
        assert set(said) == {"err-s_q"} and not app.query_one("#err-s_q").has_class("-visible")


@pytest.fixture
def user_presets(tmp_path, monkeypatch):
    folder = tmp_path / "presets"
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
    return folder


async def opened(pilot, result) -> None:
    """`result` shown as a saved result opens: its configuration in the form, then the result."""
    app = pilot.app
    app.form.load(result.config)
    await wait_for(pilot, lambda: app.mask_config[0] == result.config)
    app.show_result(result)
    await pilot.pause()


@pytest.mark.asyncio
async def test_the_form_says_each_change_once_a_training_step_fills_a_table_a_pass_and_fp8_its_scales():
    """One start without an engine (a start is most of such a test's time), the checks of what were
    these tests, in turn:
    - test_the_form_says_each_change_once: mounting or loading sets every field, each posting its
      own change: the app must hear of the new configuration once, not once per field (each
      message redraws the mask view);
    - test_a_gpu_training_step_fills_a_table_a_pass_then_every_pane_draws_a_forward: real GPU
      RunResults, recorded on the H200 with `run --json`: the Llama-3-8B training step, then the
      seed's forward after it; then the seed's recording with its last plan as heuristic mode
      OPENSOURCE gives it (left to the backend's heuristics) and the one before it from an
      open-source engine: the short column says which, a selected plan's detail says it in full;
    - test_an_fp8_result_shows_the_scaling_block.
    Each recording is shown as a saved result opens: its configuration in the form first."""
    from tui.app.messages import ConfigEdited
    from tui.model.results import PLAN_SOURCES

    heard: list[ConfigEdited] = []
    app = make_app(SMALL, start_engine=False)
    original = app.runs.edited
    app.runs.edited = lambda message: (heard.append(message), original(message))
    async with app.run_test(size=(120, 40)) as pilot:
        # the form says each change once
        await wait_for(pilot, lambda: len(heard) > 0)  # the form's first reading, at mount
        preset = SMALL.replace(h_q=8, h_kv=2, s_kv=128, window=32, backward=True)
        app.form.load(preset)
        await wait_for(pilot, lambda: heard[-1].config == preset)
        assert [m.config for m in heard] == [SMALL, preset]
        app.form.load(preset)  # the same again: nothing new to say
        await set_field(pilot, app, "h_kv", "3")
        await wait_for(pilot, lambda: heard[-1].config is None)
        await set_field(pilot, app, "h_kv", "3")  # nor here
        await set_field(pilot, app, "h_kv", "4")
        await wait_for(pilot, lambda: heard[-1].config is not None)
        assert [m.config for m in heard[2:]] == [None, preset.replace(h_kv=4)] and "h_kv" in heard[2].errors

        # a training step fills a table a pass, then every pane draws a forward
        result = TRAINING  # llama3-8b-train, recorded on the H200
        fwd, b = result.passes
        await opened(pilot, result)
        summary = str(app.query_one("#summary").render())
        figure = f"backward kernel {b.timing.median_us / 1000:.3f} ms ({b.timing.regime_words})  {b.tflops:.1f} TFLOPS"
        assert figure in summary and b.timing.regime_words.startswith("sustained")
        assert f"step fwd+bwd {result.step_us / 1000:.3f} ms" in summary
        worst = max(c.cudnn.max_abs for c in b.checks)
        assert f"cuDNN dQ/dK/dV max abs err {worst:.2e} PASS" in summary
        table = app.query_one("#plans-backward")
        assert table.display and table.row_count == len(b.plans) == 2
        assert app.query_one("#plans-backward-head").display  # several passes: each table is named
        marks = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert marks[b.heuristic_plan].startswith("H") and sum("*" in m for m in marks) == 1
        assert app.query_one("#plans-forward").row_count == len(fwd.plans)  # the forward's are still there
        table.focus()
        await pilot.press("down")
        assert str(app.query_one("#plan-detail").render()).startswith(f"backward plan 1: {b.plans[1].name}")
        await show_pane(pilot, "phases")
        assert app.query_one("#phases-backward").row_count == 6
        await show_pane(pilot, "accuracy")
        checks = app.query_one("#accuracy-table")
        dv = [str(c) for c in checks.every_row[6]]
        assert dv[:3] == ["backward", "dV", "cuDNN"] and dv[4] == f"{b.checks[2].cudnn.max_abs:.2e}"
        assert not app.query_one("#fp8-table").display
        await show_pane(pilot, "latency")
        assert app.query_one("#latency").history == {
            "forward": [(1, fwd.timing.median_us)],
            "backward": [(1, b.timing.median_us)],
        }
        await show_pane(pilot, "graph")
        assert app.query_one("#graph-backward").display
        app.show_result(RECORDED)  # a forward-only result hides the backward's sections again
        await pilot.pause()
        assert not app.query_one("#graph-backward").display  # the pane on screen: drawn at once
        await show_pane(pilot, "accuracy")  # hidden meanwhile: drawn when shown
        assert app.query_one("#accuracy-table").row_count == 2  # cuDNN's O, then torch's
        await show_pane(pilot, "plans")
        assert not app.query_one("#plans-backward").display
        fwd = RECORDED.forward
        plans = app.query_one("#plans-forward")
        assert plans.row_count == len(fwd.plans) == 6
        assert not app.query_one("#plans-forward-head").display  # one pass: no heading needed
        marks = [str(plans.get_row_at(i)[1]) for i in range(plans.row_count)]
        assert marks[fwd.heuristic_plan].startswith("H") and sum("*" in m for m in marks) == 1
        summary = str(app.query_one("#summary").render())
        assert f"forward kernel {fwd.timing.median_us:.2f} µs" in summary and "PASS" in summary
        await show_pane(pilot, "phases")
        assert app.query_one("#phases-forward").row_count == 6
        await show_pane(pilot, "latency")
        assert app.query_one("#latency").history == {  # the second result: run 2, a forward alone
            "forward": [(1, result.forward.timing.median_us), (2, fwd.timing.median_us)],
            "backward": [(1, b.timing.median_us)],
        }
        await show_pane(pilot, "environment")
        assert "NVIDIA H200" in [str(app.query_one("#environment").get_row_at(i)[1]) for i in range(3)]

        # each plan says where it comes from, in a column and in full in its detail
        sources = {len(fwd.plans) - 1: PLAN_SOURCES[2], len(fwd.plans) - 2: PLAN_SOURCES[1]}
        plans = tuple(dataclasses.replace(p, source=sources.get(p.index, p.source)) for p in fwd.plans)
        result = dataclasses.replace(RECORDED, passes=(dataclasses.replace(fwd, plans=plans),))
        await show_pane(pilot, "plans")
        app.show_result(result)
        await pilot.pause()
        table = app.query_one("#plans-forward")
        at = [str(c.label) for c in table.columns.values()].index("from")
        column = [str(table.get_row_at(i)[at]) for i in range(table.row_count)]
        assert column == ["backend"] * (len(plans) - 2) + ["open-source", "delegated"], column
        detail = app.query_one("#plan-detail")
        assert "from backend: an engine of the cuDNN backend library" in str(detail.render())  # the pick
        table.focus()
        table.move_cursor(row=0)
        await pilot.press(*["down"] * (len(plans) - 1))
        await wait_for(pilot, lambda: str(detail.render()).startswith(f"forward plan {len(plans) - 1}"))
        assert "from delegated: left to the backend's heuristics" in str(detail.render())

        # an FP8 result shows the scaling block
        result = FP8  # llama3-70b-fp8-prefill, recorded on the H200
        fp8 = result.forward.fp8
        await opened(pilot, result)
        amax, ref = fp8.amax["amax_o"], fp8.reference_amax["amax_o"]
        assert f"amax_o {amax:.4g} (reference {ref:.4g})" in str(app.query_one("#summary").render())
        await show_pane(pilot, "accuracy")
        head = str(app.query_one("#fp8-head").render())
        assert "per-tensor" in head and f"scale_o {fp8.scales['scale_o']:.4g}" in head
        table = app.query_one("#fp8-table")
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [["forward", "amax_o", f"{amax:.4g}", f"{ref:.4g}", f"{amax / ref:.3f}"]]
        assert app.query_one("#f-dtype", Select).value == "fp8_e4m3"
