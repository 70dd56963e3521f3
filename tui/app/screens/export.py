"""Ctrl+E: which export, and where: the folder and whether the file exists are shown while the
name is typed, before anything is written."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet

from ...model.config import SdpaConfig
from ...present.export import EXPORT_KINDS, default_filename
from ...store.files import resolved, write_problem

KINDS = (
    ("script", "Reproduction script (.py): cudnn + torch only, checks and times itself"),
    ("json", "The whole result as JSON (same schema as `run --json`)"),
    ("csv", "The plans table as CSV, with the environment on each row"),
)


def where_words(path: str) -> tuple[str, bool]:
    """Where a file name typed in the dialog lands, in words, and whether it can be written there."""
    if not path:
        return "give a file name", False
    problem = write_problem(path)
    target = resolved(path)
    if problem:
        return f"cannot write {target}: {problem}", False
    there = "exists there: you will be asked before it is replaced" if target.exists() else "a new file"
    return f"into {target.parent}: {target.name} ({there})", True


class ExportDialog(ModalScreen[tuple[str, str] | None]):
    """Returns (kind, path), or None when cancelled. JSON and CSV need a result on screen. Up and
    Down in the file name choose the kind, so that Down then Enter exports the next kind."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]
    DEFAULT_CSS = """
    ExportDialog #export-where { color: $text-muted; margin-top: 1; }
    ExportDialog #export-where.-error { color: $error; }
    """

    def __init__(self, config: SdpaConfig, has_result: bool) -> None:
        super().__init__()
        self.config = config
        self.has_result = has_result
        self._kind_shown = "script"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Export {self.config.label()}", classes="dialog-title", markup=False)
            with RadioSet(id="export-kind"):
                for i, (kind, text) in enumerate(KINDS):
                    yield RadioButton(
                        text,
                        value=i == 0,
                        id=f"kind-{kind}",
                        disabled=kind != "script" and not self.has_result,
                    )
            yield Input(default_filename(self.config, "script"), id="export-path")
            yield Label("", id="export-where", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()  # Enter exports; Up and Down pick the kind
        self._show_where()

    @property
    def path_input(self) -> Input:
        return self.query_one("#export-path", Input)

    @property
    def kind(self) -> str:
        pressed = self.query_one(RadioSet).pressed_button
        return (pressed.id or "kind-script").removeprefix("kind-") if pressed else "script"

    def on_key(self, event) -> None:
        if event.key in ("down", "up") and self.focused is self.path_input:
            self._step_kind(1 if event.key == "down" else -1)
            event.stop()

    def _step_kind(self, step: int) -> None:
        """The next (or previous) kind that can be exported, pressed; none past either end."""
        buttons = [b for b in self.query(RadioButton) if not b.disabled]
        now = next((i for i, b in enumerate(buttons) if b.value), 0)
        if 0 <= now + step < len(buttons):
            buttons[now + step].value = True

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        """The file name follows the kind: the default name, or the typed one with its suffix."""
        old, new = self._kind_shown, self.kind
        self._kind_shown = new
        value = self.path_input.value
        if value.strip() == default_filename(self.config, old) or not value.strip():
            self.path_input.value = default_filename(self.config, new)
        elif value.endswith(EXPORT_KINDS[old]):
            self.path_input.value = value.removesuffix(EXPORT_KINDS[old]) + EXPORT_KINDS[new]

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show_where()

    def _show_where(self) -> bool:
        words, ok = where_words(self._path())
        where = self.query_one("#export-where", Label)
        where.update(words)
        where.set_class(not ok, "-error")
        return ok

    def _path(self) -> str:
        return str(Path(self.path_input.value.strip()).expanduser()) if self.path_input.value.strip() else ""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "export-ok":
            self._done()
        else:
            self.dismiss(None)

    def _done(self) -> None:
        if self._show_where():  # a path that cannot be written keeps the dialog open, saying why
            self.dismiss((self.kind, self._path()))
