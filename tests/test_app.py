"""The dashboard driven by Pilot on the CPU, with a real engine process told there is no GPU."""

from __future__ import annotations

import os
import signal
import time

import pytest
from test_snapshots import FP8, RECORDED, TRAINING
from textual.widgets import Checkbox, Input, Select

from tui.app import make_app
from tui.engine.config import SdpaConfig
from tui.engine.results import Environment

NO_GPU = Environment(gpu_available=False, unavailable_reason="CPU mode requested by the test")
SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


async def wait_for(pilot, predicate, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for the dashboard; status: {status_text(pilot.app)}")
        await pilot.pause(0.1)


def status_text(app) -> str:
    return str(app.query_one("#status").render())


async def set_field(pilot, app, name: str, value: str) -> None:
    app.query_one(f"#f-{name}", Input).value = value
    await pilot.pause()


@pytest.mark.asyncio
async def test_no_gpu_mode_explains_itself_and_still_checks():
    app = make_app(SMALL, environment_override=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        assert app.result.status == "cpu_only"
        assert "no GPU: CPU mode requested by the test" in status_text(app)
        assert app.result.accuracy.torch_lowp.mismatched == 0
        env_rows = [str(app.query_one("#environment").get_row_at(i)[0]) for i in range(3)]
        assert "GPU unavailable" in env_rows


@pytest.mark.asyncio
async def test_editing_a_field_reruns_and_updates_the_panes():
    app = make_app(SMALL, environment_override=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        await set_field(pilot, app, "s_q", "32")
        await wait_for(pilot, lambda: app.result.config.s_q == 32)
        assert app.result.config == SMALL.replace(s_q=32)
        summary = str(app.query_one("#summary").render())
        assert "s32x64" in summary
        assert app.query_one("#phases-table").row_count == 2  # define, validate


@pytest.mark.asyncio
async def test_a_bad_value_shows_the_field_error_and_starts_no_run():
    app = make_app(SMALL, environment_override=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        shown = app.result
        await set_field(pilot, app, "h_kv", "3")
        error = app.query_one("#err-h_kv")
        assert "h_q must be a multiple of h_kv (got 2 and 3)" in str(error.render())
        assert error.has_class("-visible")
        assert app.query_one("#right").has_class("-stale")
        await pilot.pause(0.6)  # longer than the debounce
        assert app.client.busy is False and app.result is shown
        await set_field(pilot, app, "b", "x")
        assert "whole number" in str(app.query_one("#err-b").render())
        await pilot.press("ctrl+r")
        assert app.client.busy is False and "not run" in status_text(app)


@pytest.mark.asyncio
async def test_engine_killed_mid_run_is_reported_and_recovered():
    app = make_app(SMALL, environment_override=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        first_pid = app.client.pid
        await set_field(pilot, app, "s_kv", "128")
        await pilot.pause(0.3)  # the debounced run is submitted
        os.kill(first_pid, signal.SIGKILL)
        await wait_for(pilot, lambda: "engine restarted" in status_text(app))
        assert "SIGKILL" in status_text(app)
        assert app.client.pid != first_pid and app.client.restarts == 1
        assert app.query_one("#f-s_kv", Input).value == "128"  # the form is as the user left it
        await set_field(pilot, app, "s_q", "128")
        await wait_for(pilot, lambda: app.result.config.s_q == 128)
        assert app.result.config.s_kv == 128


@pytest.mark.asyncio
async def test_help_and_palette_commands():
    app = make_app(SMALL, environment_override=NO_GPU, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
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


@pytest.mark.asyncio
async def test_panes_render_a_result_measured_on_the_h200():
    """Every pane draws a real GPU RunResult (recorded on the H200 with `run --json`)."""
    from pathlib import Path

    from tui.engine.results import RunResult

    result = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())
    app = make_app(result.config, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_result(result)
        await pilot.pause()
        plans = app.query_one("#plans-table")
        assert plans.row_count == len(result.plans) == 6
        marks = [str(plans.get_row_at(i)[1]) for i in range(plans.row_count)]
        assert marks[result.heuristic_plan].startswith("H") and sum("*" in m for m in marks) == 1
        summary = str(app.query_one("#summary").render())
        assert f"kernel {result.timing.median_us:.2f} µs" in summary and "PASS" in summary
        assert app.query_one("#phases-table").row_count == 6
        assert app.query_one("#accuracy-table").row_count == 2
        assert app.query_one("#latency").history == [result.timing.median_us]
        assert "NVIDIA H200" in [str(app.query_one("#environment").get_row_at(i)[1]) for i in range(3)]


@pytest.fixture
def user_presets(tmp_path, monkeypatch):
    folder = tmp_path / "presets"
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(folder))
    return folder


@pytest.mark.asyncio
async def test_preset_picker_filters_and_loads_and_runs(user_presets):
    app = make_app(SMALL, environment_override=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
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
async def test_save_preset_asks_before_overwriting(user_presets):
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.press(*"tiny", "enter")
        await pilot.pause()
        assert (user_presets / "tiny.toml").exists() and "tiny" in app.presets
        assert app.presets["tiny"].config == SMALL
        await set_field(pilot, app, "b", "3")
        await pilot.press("ctrl+s")
        await pilot.press(*"tiny", "enter")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "Confirm"
        await pilot.click("#confirm-yes")
        await pilot.pause()
        assert app.presets["tiny"].config.b == 3


@pytest.mark.asyncio
async def test_export_writes_a_script_and_says_where(tmp_path):
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+e")
        assert app.screen.__class__.__name__ == "ExportDialog"
        target = tmp_path / "repro.py"
        app.screen.query_one("#export-path", Input).value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        text = target.read_text()
        compile(text, str(target), "exec")
        assert "B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = 1, 2, 2, 64, 64, 64, 64" in text
        assert any(str(target) in str(n.message) for n in app._notifications)


@pytest.mark.asyncio
async def test_palette_lists_presets(user_presets):
    from tui.app.commands import ExplorerCommands

    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)):
        names = [name for name, _cb, _help in ExplorerCommands(app.screen)._commands()]
        assert "Preset: gpt2-seed" in names and "Export ..." in names and "Layout: SBHD" in names


@pytest.mark.asyncio
async def test_mask_fields_reach_the_config_and_the_mask_view():
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await set_field(pilot, app, "window", "16")
        await set_field(pilot, app, "seq_lens_q", "ratio 0.5")
        config, errors = app.form.read()
        assert errors == {}
        assert config.window == 16 and config.seq_lens_q == (32,) and config.seq_lens_kv == (64,)
        assert app.query_one("#mask").config == config
        await set_field(pilot, app, "seq_lens_kv", "1,2,3")
        assert "one length per batch entry" in str(app.query_one("#err-seq_lens_kv").render())
        app.form.load(SMALL.replace(alibi=True, bias="bxh", window=8))
        await pilot.pause()
        config, _ = app.form.read()
        assert (config.alibi, config.bias, config.window) == (True, "bxh", 8)


@pytest.mark.asyncio
async def test_training_fields_reach_the_config_and_load_from_a_preset():
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
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
        assert app.query_one("#mask").config == config  # the ConfigEdited the form posted carried it
        assert not app.query_one("#right").has_class("-stale")
        app.form.load(SMALL)
        await pilot.pause()
        assert app.form.read()[0] == SMALL
        preset = SMALL.replace(dtype="fp8_e4m3", backward=True, deterministic=True)
        app.form.load(preset)
        await pilot.pause()
        assert app.form.read()[0] == preset and app.query_one("#f-backward", Checkbox).value is True


@pytest.mark.asyncio
async def test_deterministic_without_backward_shows_the_field_error():
    app = make_app(SMALL.replace(backward=True), start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
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


@pytest.mark.asyncio
async def test_a_cpu_training_step_shows_the_backward_graph_and_torchs_gradients():
    """A real engine result: without a GPU the backward graph is still defined and validated,
    and torch's own backward is checked against fp32 autograd on the CPU."""
    app = make_app(SMALL.replace(backward=True), environment_override=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        b = app.result.backward
        assert b is not None and b.status == "cpu_only" and set(b.torch_gradients) == {"dQ", "dK", "dV"}
        assert app.query_one("#backward-phases-table").display
        assert app.query_one("#backward-phases-table").row_count == len(b.phases) == 2
        assert "backward graph: total" in str(app.query_one("#backward-phases-head").render())
        grads = app.query_one("#gradients-table")
        assert grads.row_count == 3
        assert [str(c) for c in grads.get_row_at(0)][:1] == ["dQ"] and str(grads.get_row_at(0)[-1]) == "pass"
        assert str(grads.get_row_at(0)[4]) == "not run"  # cuDNN's backward did not run
        assert "cuDNN's backward did not run" in str(app.query_one("#gradients-head").render())
        assert "SDPA_BWD" in app.query_one("#backward-graph-json").content.code
        assert "torch fp16 (CPU) dQ/dK/dV max abs err" in str(app.query_one("#summary").render())
        assert not app.query_one("#fp8-table").display


@pytest.mark.asyncio
async def test_a_gpu_training_step_fills_the_backward_tables():
    result = TRAINING  # llama3-8b-train, recorded on the H200
    b = result.backward
    app = make_app(result.config, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_result(result)
        await pilot.pause()
        summary = str(app.query_one("#summary").render())
        assert (
            f"backward {b.timing.median_us / 1000:.3f} ms" in summary and f"{b.tflops:.1f} TFLOPS" in summary
        )
        assert f"step fwd+bwd {result.step_us / 1000:.3f} ms" in summary
        worst = max(m.max_abs for m in b.gradients.values())
        assert f"dQ/dK/dV max abs err {worst:.2e} PASS" in summary
        table = app.query_one("#backward-plans-table")
        assert table.display and table.row_count == len(b.plans) == 2
        marks = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert marks[b.heuristic_plan].startswith("H") and sum("*" in m for m in marks) == 1
        assert app.query_one("#plans-table").row_count == len(result.plans)  # the forward's are still there
        table.focus()
        await pilot.press("down")
        assert str(app.query_one("#plan-detail").render()).startswith(f"backward plan 1: {b.plans[1].name}")
        assert app.query_one("#backward-phases-table").row_count == 6
        grads = app.query_one("#gradients-table")
        assert grads.row_count == 3 and str(grads.get_row_at(2)[2]) == f"{b.gradients['dV'].max_abs:.2e}"
        assert app.query_one("#latency").backward_history == [(1, b.timing.median_us)]
        assert not app.query_one("#fp8-table").display
        app.show_result(RECORDED)  # a forward-only result hides the backward's sections again
        await pilot.pause()
        assert (
            not app.query_one("#backward-plans-table").display
            and not app.query_one("#gradients-table").display
        )


@pytest.mark.asyncio
async def test_an_fp8_result_shows_the_scaling_block():
    result = FP8  # llama3-70b-fp8-prefill, recorded on the H200
    app = make_app(result.config, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_result(result)
        await pilot.pause()
        amax, ref = result.fp8.amax["amax_o"], result.fp8.reference_amax["amax_o"]
        assert f"amax_o {amax:.4g} (reference {ref:.4g})" in str(app.query_one("#summary").render())
        head = str(app.query_one("#fp8-head").render())
        assert "per-tensor" in head and f"scale_o {result.fp8.scales['scale_o']:.4g}" in head
        table = app.query_one("#fp8-table")
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [["forward", "amax_o", f"{amax:.4g}", f"{ref:.4g}", f"{amax / ref:.3f}"]]
        assert app.query_one("#f-dtype", Select).value == "fp8_e4m3"


@pytest.mark.asyncio
async def test_the_form_says_each_change_once():
    """Mounting or loading sets every field, each posting its own change: the app must hear of
    the new configuration once, not once per field (each message redraws the mask view)."""
    from tui.app.messages import ConfigEdited

    heard: list[ConfigEdited] = []
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        original = app._config_edited
        app._config_edited = lambda message: (heard.append(message), original(message))
        preset = SMALL.replace(h_q=8, h_kv=2, s_kv=128, window=32, backward=True)
        app.form.load(preset)
        await pilot.pause(0.2)
        assert [m.config for m in heard] == [preset]
        app.form.load(preset)  # the same again: nothing new to say
        await pilot.pause(0.2)
        assert len(heard) == 1
        await set_field(pilot, app, "h_kv", "3")
        await set_field(pilot, app, "h_kv", "3")
        assert len(heard) == 2 and heard[-1].config is None and "h_kv" in heard[-1].errors
