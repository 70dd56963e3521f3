"""The dashboard and a GPU that fails: a known issue is marked in the form before anything runs and
is not run until the user ticks "run anyway"; the crash that follows is shown as a finding (the
plan, CUDA's words, the versions), its reproduction script is written at once, and the
Environment pane counts the engine's restarts."""

from __future__ import annotations

import dataclasses

from tests.fakes import RECORDED, FakeEngine, computed, crash, lost_context
from tests.pilot_waits import show_pane, wait_for
from tui.app import make_app
from tui.engine.runner import Engine
from tui.model.config import SdpaConfig
from tui.model.statuses import STATUS_CRASH, STATUS_KNOWN_ISSUE
from tui.present import export

FP8_DROPOUT = SdpaConfig(
    b=2, h_q=4, h_kv=4, s_q=128, s_kv=128, d_qk=128, d_v=128, dtype="fp8_e4m3", dropout=0.1
)
HOPPER_919 = dataclasses.replace(
    RECORDED.environment, cudnn_backend_version="9.19.0", compute_capability="9.0"
)


async def test_a_known_issue_is_marked_not_run_until_ticked_and_its_crash_is_a_finding(monkeypatch, tmp_path):
    monkeypatch.setattr(export, "crash_folder", lambda: tmp_path)
    gate = computed(Engine(environment=HOPPER_919))  # the engine's own gate: no GPU work before it answers
    fake = FakeEngine(lost_context(), environment=HOPPER_919).then(gate)
    fake.log_file = "/var/log/sdpa-explorer/engine.log"  # where a real client's engine writes
    app = make_app(FP8_DROPOUT, client=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.result is not None)
        assert app.result.status == STATUS_KNOWN_ISSUE and fake.requests[-1][1].run_anyway is False
        mark = app.query_one("#known-issue")
        assert mark.has_class("-visible") and "FP8 forward with dropout" in str(mark.render())
        assert "not run unless ticked" in str(mark.render())
        assert "KNOWN ISSUE" in str(app.query_one("#summary").render())

        app.query_one("#f-run_anyway").value = True  # the user asks to run it anyway
        await wait_for(pilot, lambda: app.result is not None and app.result.status == STATUS_CRASH)
        assert fake.requests[-1][1].run_anyway is True and "runs anyway" in str(mark.render())
        summary = str(app.query_one("#summary").render())
        for words in (
            "CRASHED",
            "the CUDA context was lost",
            "eng2_k24=32",
            "cuDNN 9.19.0",
            "Ctrl+E exports",
        ):
            assert words in summary, words
        scripts = list(tmp_path.glob("crash-*.py"))
        assert len(scripts) == 1 and "What it reproduces" in scripts[0].read_text()
        notes = [n.message for n in app._notifications]
        assert any(str(scripts[0]) in n for n in notes), notes
        await show_pane(pilot, "environment")
        await wait_for(pilot, lambda: app.query_one("#environment").row_count > 0 and restarts_row(app) != "")
        assert restarts_row(app).startswith("1 (last: a run lost the CUDA context")

        fake.then(crash())  # native code dies mid-build: the notification says where its output went
        app.query_one("#f-b").value = "3"
        await wait_for(pilot, lambda: any("SIGSEGV" in n.message for n in app._notifications))
        died = next(n.message for n in app._notifications if "SIGSEGV" in n.message)
        assert died.endswith("Its output is in /var/log/sdpa-explorer/engine.log.")


def restarts_row(app) -> str:
    table = app.query_one("#environment")
    for key in table.rows:
        name, value = table.get_row(key)
        if str(name) == "engine restarts":
            return str(value)
    return ""
