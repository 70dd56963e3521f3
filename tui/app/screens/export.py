"""Ctrl+E: which export, and where."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet

from ...engine.config import SdpaConfig
from ...export import default_filename

KINDS = (
    ("script", "Reproduction script (.py): cudnn + torch only, checks and times itself"),
    ("json", "The whole result as JSON (same schema as `run --json`)"),
    ("csv", "The plans table as CSV, with the environment on each row"),
)


class ExportDialog(ModalScreen[tuple[str, str] | None]):
    """Returns (kind, path), or None when cancelled. JSON and CSV need a result on screen."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, config: SdpaConfig, has_result: bool) -> None:
        super().__init__()
        self.config = config
        self.has_result = has_result

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Export {self.config.label()}", classes="dialog-title")
            with RadioSet(id="export-kind"):
                for i, (kind, text) in enumerate(KINDS):
                    yield RadioButton(
                        text,
                        value=i == 0,
                        id=f"kind-{kind}",
                        disabled=kind != "script" and not self.has_result,
                    )
            yield Input(default_filename(self.config, "script"), id="export-path")
            with Horizontal(classes="buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()  # Enter exports; Tab reaches the kinds

    @property
    def kind(self) -> str:
        pressed = self.query_one(RadioSet).pressed_button
        return (pressed.id or "kind-script").removeprefix("kind-") if pressed else "script"

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        self.query_one("#export-path", Input).value = default_filename(self.config, self.kind)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "export-ok":
            self._done()
        else:
            self.dismiss(None)

    def _done(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if path:
            self.dismiss((self.kind, path))
