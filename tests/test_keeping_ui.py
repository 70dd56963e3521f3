"""What the dashboard keeps, driven by Pilot: presets and their problems shown as typed (never
read as markup), one toast however many problems, and an export that shows its folder before
writing, asks before replacing a file, and takes Down then Enter in the file name to the next
kind."""

from __future__ import annotations

import json

import pytest
from fakes import RECORDED
from pilot_waits import click, wait_for
from textual.widgets import Input

from tui.app import make_app
from tui.model.config import SdpaConfig
from tui.present.export import default_filename

SMALL = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, d_qk=64, d_v=64)


def screen_name(app) -> str:
    return app.screen.__class__.__name__


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


@pytest.mark.asyncio
async def test_markup_in_presets_and_many_problems_never_crash_the_dashboard(tmp_path, monkeypatch):
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(tmp_path))
    (tmp_path / "key.toml").write_text('"[/x]" = 1\n')
    (tmp_path / "tagged.toml").write_text('description = "[/x] closing tag"\n[config]\nb = 1\n')
    (tmp_path / "many.toml").write_text("".join(f"k{i} = 1\n" for i in range(300)))
    app = make_app(SMALL, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        (toast,) = app._notifications  # one, not one a problem
        assert "key.toml, line 1, key '[/x]'" in toast.message and "Ctrl+O lists them" in toast.message
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: screen_name(app) == "PresetPicker")
        problems = text_of(app, "#picker-problems")
        assert "key '[/x]': unknown key" in problems and "many.toml: and 295 more problems" in problems
        assert "[/x] closing tag" in str(app.screen.query_one("#picker-list").get_option("tagged").prompt)
        await pilot.press(*"tagged", "enter")  # loads it: the status line quotes its description
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        assert app.form.read()[0].b == 1 and "[/x] closing tag" in str(app.status.render())
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: screen_name(app) == "SavePreset")
        await pilot.press(*"[/x]", "enter")
        await wait_for(
            pilot, lambda: screen_name(app) == "SavePreset" and "[/x]" in text_of(app, "#save-error")
        )
        assert "must start with a letter or digit" in text_of(app, "#save-error")
        name = app.screen.query_one("#save-name")  # the name refused stays, to be corrected
        assert name.value == "[/x]" and app.screen.focused is name


@pytest.mark.asyncio
async def test_an_export_shows_its_folder_asks_before_replacing_and_down_enter_picks_json(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a file name alone lands in the working folder
    json_name = default_filename(RECORDED.config, "json")
    app = make_app(opened=RECORDED, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()

        async def export(*keys: str) -> None:
            await pilot.press("ctrl+e")
            await wait_for(pilot, lambda: screen_name(app) == "ExportDialog")
            assert f"into {tmp_path}: " in text_of(app, "#export-where")  # before anything is written
            await pilot.press(*keys)

        await export()
        path = app.screen.query_one("#export-path", Input)
        path.value = str(tmp_path / "no-such-folder" / "x.py")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "does not exist" in text_of(app, "#export-where"))
        assert screen_name(app) == "ExportDialog" and not (tmp_path / "no-such-folder").exists()
        path.value = default_filename(RECORDED.config, "script")
        await pilot.press("down", "enter")  # the file name has the focus: Down picks the next kind
        await wait_for(pilot, lambda: (tmp_path / json_name).exists())
        assert json.loads((tmp_path / json_name).read_text())["config"] == RECORDED.config.to_dict()
        assert sorted(p.name for p in tmp_path.iterdir()) == [json_name]
        (tmp_path / json_name).write_text("mine")
        await export("down")
        await wait_for(pilot, lambda: "exists there" in text_of(app, "#export-where"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_name(app) == "Confirm")
        await click(pilot, "#confirm-no")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        assert (tmp_path / json_name).read_text() == "mine"
        await export("down", "enter")
        await wait_for(pilot, lambda: screen_name(app) == "Confirm")
        await click(pilot, "#confirm-yes")
        await wait_for(pilot, lambda: (tmp_path / json_name).read_text() != "mine")
