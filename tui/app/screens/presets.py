"""Preset picker (filter as you type, Enter loads), save-as dialog, and the overwrite question."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList
from textual.widgets.option_list import Option

from ...store.presets import Preset, PresetProblem, problem_lines

PICKER_PROBLEMS = 12  # lines of presets that did not load under the list, then a count


def _prompt(preset: Preset) -> Text:
    t = Text()
    t.append(preset.name, style="bold")
    t.append(f"  {preset.config.label()}", style="cyan")
    origin = (
        "yours" + (", hides the built-in" if preset.shadows_builtin else "")
        if preset.origin == "user"
        else "built-in"
    )
    t.append(f"  ({origin})", style="dim")
    if preset.description:
        t.append(f"\n  {preset.description}", style="dim")
    return t


class PresetPicker(ModalScreen[Preset | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, presets: dict[str, Preset], problems: list[PresetProblem]) -> None:
        super().__init__()
        self.presets = presets
        self.problems = problems

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="dialog"):
            yield Label("Presets: type to filter, Enter loads into the form and runs", classes="dialog-title")
            yield Input(placeholder="filter by name, model or shape", id="picker-filter")
            yield OptionList(id="picker-list")
            if self.problems:  # user text: shown as typed, never read as markup
                lines = problem_lines(self.problems, PICKER_PROBLEMS, "`sdpa-explorer presets` lists them")
                yield Label(
                    "\n".join(f"not loaded: {line}" for line in lines), id="picker-problems", markup=False
                )

    def on_mount(self) -> None:
        self._fill("")

    def _fill(self, text: str) -> None:
        words = text.lower().split()
        options = self.query_one("#picker-list", OptionList)
        options.clear_options()
        for p in sorted(self.presets.values(), key=lambda p: (p.origin != "user", p.name)):
            haystack = f"{p.name} {p.description} {p.config.label()}".lower()
            if all(w in haystack for w in words):
                options.add_option(Option(_prompt(p), id=p.name))
        if options.option_count:
            options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one("#picker-list", OptionList)
        if options.highlighted is not None:
            self.dismiss(self.presets[options.get_option_at_index(options.highlighted).id])

    def on_key(self, event) -> None:
        if event.key in ("down", "up") and self.focused is self.query_one("#picker-filter"):
            options = self.query_one("#picker-list", OptionList)
            options.action_cursor_down() if event.key == "down" else options.action_cursor_up()
            event.stop()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.presets[event.option.id])


class SavePreset(ModalScreen[tuple[str, str] | None]):
    """Asks for a name (and a description); returns them, or None when cancelled. Asked again after
    a refusal, it shows the name and description refused, to be corrected."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, label: str, error: str = "", answer: tuple[str, str] = ("", "")) -> None:
        super().__init__()
        self.label = label
        self.error = error
        self.answer = answer

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Save {self.label} as your preset", classes="dialog-title")
            yield Input(self.answer[0], placeholder="name (letters, digits, . _ -)", id="save-name")
            yield Input(self.answer[1], placeholder="description (optional)", id="save-description")
            yield Label(
                self.error,
                id="save-error",
                classes="field-error -visible" if self.error else "field-error",
                markup=False,  # the error quotes the name as typed
            )
            with Horizontal(classes="buttons"):
                yield Button("Save", variant="primary", id="save-ok")
                yield Button("Cancel", id="save-cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save-ok":
            self._done()
        else:
            self.dismiss(None)

    def _done(self) -> None:
        name = self.query_one("#save-name", Input).value.strip()
        if not name:
            error = self.query_one("#save-error", Label)
            error.update("a name is needed")
            error.add_class("-visible")
            return
        self.dismiss((name, self.query_one("#save-description", Input).value.strip()))


class Confirm(ModalScreen[bool]):
    BINDINGS = [Binding("escape", "dismiss(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title", markup=False)  # it may quote a path
            with Horizontal(classes="buttons"):
                yield Button("Yes", variant="warning", id="confirm-yes")
                yield Button("No", variant="primary", id="confirm-no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")
