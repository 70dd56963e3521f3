"""What the user keeps from the dashboard: presets loaded and saved, exports written, help.

A part the app holds, for its actions that touch files rather than the engine, so app.py keeps
to the flow form -> engine -> panes. Dialogs and exporters are imported when first asked for: the first
paint needs none of them, nor the presets (read once it is on screen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding

from ..model.config import SdpaConfig
from ..model.options import options_from
from ..store.files import atomic_write, resolved
from .host import Host

if TYPE_CHECKING:
    from ..store.presets import Preset

TOAST_PROBLEMS = 3  # a start-up toast says this many of the presets' problems, then a count


class Keeping:
    """The presets, the exports and help: dialogs on the app's screen, files through store/."""

    def __init__(self, app: Host) -> None:
        self.app = app

    def reload_presets(self) -> None:
        """Presets read again; what did not load is one toast (the first few problems and a
        count), however many files are broken: Ctrl+O lists them."""
        from ..store.presets import load_all, problem_lines

        self.app.presets, self.app.preset_problems = load_all()
        if self.app.preset_problems:
            lines = problem_lines(self.app.preset_problems, TOAST_PROBLEMS, "Ctrl+O lists them")
            self.app.notify(
                "\n".join(lines), title="Presets not loaded", severity="warning", timeout=10, markup=False
            )

    def pick_preset(self) -> None:
        from .screens.presets import PresetPicker

        self.app.push_screen(PresetPicker(self.app.presets, self.app.preset_problems), self.load_preset)

    def load_preset(self, preset: Preset | None) -> None:
        if preset is not None:
            self.app.keeper.loaded_preset = preset  # a run of its configuration is kept under its name
            self.app.form.load(preset.config)
            if preset.regime:  # a preset that says how its figures are taken
                self.app.form.load_options(options_from({"regime": preset.regime}, self.app.form.options))
            self.app.status.state = self.app.status.state.preset_loaded(preset.name, preset.description)

    def _form_config(self, what: str) -> SdpaConfig | None:
        config, errors = self.app.form.read()
        if config is None:
            self.app.notify(
                f"fix {', '.join(sorted(errors))} first", title=f"Cannot {what}", severity="error"
            )
        return config

    def save_preset(self) -> None:
        from .screens.presets import SavePreset

        config = self._form_config("save a preset")
        if config is not None:
            self.app.push_screen(SavePreset(config.label()), lambda answer: self._save_preset(config, answer))

    def _save_preset(
        self, config: SdpaConfig, answer: tuple[str, str] | None, overwrite: bool = False
    ) -> None:
        from ..store.presets import PresetExists, save_user
        from .screens.presets import Confirm, SavePreset

        if answer is None:
            return
        name, description = answer
        try:
            path = save_user(
                name, config, description, overwrite=overwrite, regime=self.app.form.options.timing.regime
            )
        except PresetExists:
            question = f"You already have a preset named {name!r}. Overwrite it?"
            self.app.push_screen(
                Confirm(question), lambda yes: yes and self._save_preset(config, answer, True)
            )
            return
        except ValueError as exc:
            self.app.push_screen(
                SavePreset(config.label(), str(exc), answer), lambda again: self._save_preset(config, again)
            )
            return
        except OSError as exc:
            self.app.notify(f"{exc}", title=f"Preset {name!r} not saved", severity="error", markup=False)
            return
        self.reload_presets()
        self.app.notify(str(path), title=f"Saved preset {name!r}", markup=False)

    def export(self) -> None:
        from .screens.export import ExportDialog

        config = self._form_config("export")
        if config is not None:
            has_result = self.app.result is not None and self.app.result.config == config
            self.app.push_screen(
                ExportDialog(config, has_result), lambda answer: self._export(config, answer)
            )

    def _export(self, config: SdpaConfig, answer: tuple[str, str] | None, replace: bool = False) -> None:
        """Write the export the dialog asked for; a file already there is replaced only when the
        user says so."""
        from ..present.export import render, script
        from .screens.presets import Confirm

        if answer is None:
            return
        kind, path = answer
        if not replace and resolved(path).exists():
            question = f"{resolved(path)} exists. Replace it?"
            self.app.push_screen(Confirm(question), lambda yes: yes and self._export(config, answer, True))
            return
        try:
            text = script(config) if kind == "script" else render(kind, self.app.result)
            written = atomic_write(path, text)
        except OSError as exc:
            words = f"{path}: {exc.strerror or exc}"
            self.app.notify(words, title=f"{kind} not written", severity="error", markup=False)
            return
        self.app.notify(str(written), title=f"Wrote {kind}", markup=False)

    def help(self) -> None:
        from .screens.help import HelpScreen

        focused = self.app.focused
        bindings = []
        if focused is not None:
            for binding in getattr(focused, "BINDINGS", []):
                if isinstance(binding, Binding) and binding.description:
                    bindings.append((binding.key, binding.description))
        self.app.push_screen(HelpScreen(bindings, self.app.no_gpu_reason()))
