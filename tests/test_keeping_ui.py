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
async def test_an_export_shows_its_folder_asks_before_replacing_and_markup_in_presets_never_crashes(
    tmp_path, monkeypatch
):
    """One start without an engine, a saved result opened (a start is most of such a test's time),
    the checks of what were test_an_export_shows_its_folder_asks_before_replacing_and_down_enter_picks_json
    and test_markup_in_presets_and_many_problems_never_crash_the_dashboard, in turn."""
    presets, folder = tmp_path / "presets", tmp_path / "work"
    presets.mkdir()
    folder.mkdir()
    monkeypatch.setenv("SDPA_EXPLORER_PRESET_DIR", str(presets))
    (presets / "key.toml").write_text('"[/x]" = 1\n')
    (presets / "tagged.toml").write_text('description = "[/x] closing tag"\n[config]\nb = 1\n')
    (presets / "many.toml").write_text("".join(f"k{i} = 1\n" for i in range(300)))
    monkeypatch.chdir(folder)  # a file name alone lands in the working folder
    json_name = default_filename(RECORDED.config, "json")
    app = make_app(opened=RECORDED, start_engine=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        (toast,) = app._notifications  # the presets' problems: one toast, not one a problem
        assert "key.toml, line 1, key '[/x]'" in toast.message and "Ctrl+O lists them" in toast.message

        # an export shows its folder, asks before replacing, and Down then Enter picks JSON
        async def export(*keys: str) -> None:
            await pilot.press("ctrl+e")
            await wait_for(pilot, lambda: screen_name(app) == "ExportDialog")
            assert f"into {folder}: " in text_of(app, "#export-where")  # before anything is written
            await pilot.press(*keys)

        await export()
        path = app.screen.query_one("#export-path", Input)
        path.value = str(folder / "no-such-folder" / "x.py")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "does not exist" in text_of(app, "#export-where"))
        assert screen_name(app) == "ExportDialog" and not (folder / "no-such-folder").exists()
        path.value = default_filename(RECORDED.config, "script")
        await pilot.press("down", "enter")  # the file name has the focus: Down picks the next kind
        await wait_for(pilot, lambda: (folder / json_name).exists())
        assert json.loads((folder / json_name).read_text())["config"] == RECORDED.config.to_dict()
        assert sorted(p.name for p in folder.iterdir()) == [json_name]
        (folder / json_name).write_text("mine")
        await export("down")
        await wait_for(pilot, lambda: "exists there" in text_of(app, "#export-where"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_name(app) == "Confirm")
        await click(pilot, "#confirm-no")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        assert (folder / json_name).read_text() == "mine"
        await export("down", "enter")
        await wait_for(pilot, lambda: screen_name(app) == "Confirm")
        await click(pilot, "#confirm-yes")
        await wait_for(pilot, lambda: (folder / json_name).read_text() != "mine")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)

        # markup in presets and many problems never crash the dashboard
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
