"""The configuration form: every field validated as typed, the problem shown at the field.

The widgets come from the fields' declarations (model/fields.py): a text entry, a select, a
switch or a row of checks. A field's problem is a line below it while the problem lasts
(made at its first problem, hidden when it is fixed: thirty lines made up front would cost
every start-up and restyle for nothing). Fields are shown by group, a section that folds each
(the shape and the masks open at first); in a group the labelled rows come first, then its
switches. A field that takes focus, or shows a problem, opens its section.

The folded sections' widgets (most of the form's, each styled as it mounts) are made once
the first frame is on screen, or when one is opened or reached first; until then the form holds
their values itself, so that it reads and loads the same whether they are made or not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import AwaitMount, Widget
from textual.widgets import Checkbox, Collapsible, Input, Label, Select

from ...model import known_issues
from ...model.config import ConfigError, FieldError, SdpaConfig
from ...model.fields import FIELD, OPEN_SECTIONS, SECTIONS, Field, from_entries
from ...model.options import (
    FORM_OPTIONS,
    OPTION,
    PEER_KEYS,
    Option,
    RunOptions,
    measured_under,
    option_values,
    options_from,
)
from ...model.results import RunResult
from ...model.validation import validate
from ..messages import ConfigEdited
from .form_widgets import (
    FORM_FIELDS,
    Tick,
    field_widgets,
    fields_in,
    option_widgets,
    options_in,
    peer_labels,
    section_of_name,
)

__all__ = ["FORM_FIELDS", "ConfigForm", "Tick", "measured_as"]

_WIDGETS = {"text": Input, "select": Select, "switch": Checkbox}


def _by_field(errors: list[FieldError]) -> dict[str, str]:
    """One message per field: a field with several problems says them all."""
    merged: dict[str, str] = {}
    for e in errors:
        merged[e.field] = f"{merged[e.field]}; {e.message}" if e.field in merged else e.message
    return merged


class ConfigForm(VerticalScroll):
    """Edits an SdpaConfig; posts ConfigEdited whenever what the form reads changes."""

    # focus starts in the first field, ready to type; focusing the form itself restyled its
    # hundred widgets and was two fifths of the first paint
    can_focus = False

    def __init__(self, config: SdpaConfig | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._initial = config or SdpaConfig()
        self._posted: tuple | None = None  # what the last ConfigEdited said
        self._error_lines: dict[str, Label] = {}  # field name -> its problem line, once it had one
        self._errors: dict[str, str] = {}  # the problems shown last
        # a folded section's fields and options, by name, until its widgets are made; those loaded
        # while they were being made (set on the widgets once they are); what waits for them
        self._held: dict[str, Any] = {}
        self._loaded: set[str] = set()
        self._making: dict[str, list[Callable[[], None]]] = {}  # section -> what to do once made

    def _value(self, field: Field) -> Any:
        """What the field's widgets hold: text to parse, a choice, on/off, or the checked modes."""
        if field.name in self._held:  # as its widgets would hold it
            held = self._held[field.name]
            if field.entry == "checks":
                return tuple(c for c in field.choices if c in held)
            return field.format(held) if field.entry == "text" else held
        if field.entry == "checks":
            return tuple(c for c in field.choices if self.query_one(f"#{field.form_id}-{c}", Checkbox).value)
        return self.query_one(f"#{field.form_id}", _WIDGETS[field.entry]).value

    def _show(self, field: Field, value: Any) -> None:
        if self._hold(field.name, value):
            return
        if field.entry == "checks":
            for choice in field.choices:
                self.query_one(f"#{field.form_id}-{choice}", Checkbox).value = choice in value
        else:
            widget = self.query_one(f"#{field.form_id}", _WIDGETS[field.entry])
            widget.value = field.format(value) if field.entry == "text" else value

    def value_of(self, name: str) -> Any:
        """The field `name` as its widgets hold it (text as typed), its section made or not."""
        return self._value(FIELD[name])

    def set_value(self, name: str, value: Any) -> None:
        """Show `value` (as a configuration holds it) in the field `name`, its section made or not;
        the change is an edit like any other."""
        self._show(FIELD[name], value)

    def _option_value(self, option: Option) -> Any:
        """What a run option's widgets hold: a choice, on/off, or the peers ticked in their order."""
        if option.name in self._held:
            return self._held[option.name]
        if option.kind == "peers":
            return tuple(key for key in PEER_KEYS if self.query_one(f"#f-peer-{key}", Checkbox).value)
        return self.query_one(f"#f-{option.name}", Select if option.kind == "choice" else Checkbox).value

    def _show_option(self, option: Option, value: Any) -> None:
        if self._hold(option.name, value):
            return
        if option.kind == "peers":
            for key in PEER_KEYS:
                self.query_one(f"#f-peer-{key}", Checkbox).value = key in value
        else:
            self.query_one(f"#f-{option.name}", Select if option.kind == "choice" else Checkbox).value = value

    def compose(self) -> ComposeResult:
        for section, title in SECTIONS.items():
            folded = section not in OPEN_SECTIONS  # its class given now: set at mount, it restyled the form
            with Collapsible(
                title=title, collapsed=folded, id=f"section-{section}", classes="-collapsed" * folded
            ):
                if folded:  # made once the first frame is on screen (on_mount)
                    self._held |= {f.name: getattr(self._initial, f.name) for f in fields_in(section)}
                    self._held |= {o.name: o.default for o in options_in(section)}
                else:
                    yield from self._section(section)
        yield Label("", id="known-issue", classes="field-error")  # the known issues the form matches
        yield Label("", id="err-b-memory", classes="field-error")  # problems of no one field

    # ---- the sections --------------------------------------------------------------------
    def _section(self, section: str) -> ComposeResult:
        """A section's widgets, showing what the form holds of it (the first configuration and the
        options' defaults until something was loaded)."""
        held = self._held
        for field in fields_in(section):
            yield from field_widgets(field, held.get(field.name, getattr(self._initial, field.name)))
        for option in options_in(section):
            yield from option_widgets(option, held.get(option.name, option.default))

    @property
    def made(self) -> bool:
        """Every section's widgets are made (a folded one's, once the first frame is on screen)."""
        return not self._held and not self._making

    def on_mount(self) -> None:
        self.call_after_refresh(self.make_sections)

    def make_sections(self) -> None:
        """Make the folded sections' widgets (after the first frame: nothing on it shows them)."""
        for section in SECTIONS:
            self._make(section)

    def _hold(self, name: str, value: Any) -> bool:
        """Keep a value for widgets not made yet; whether it was kept (else the widgets take it)."""
        if name not in self._held:
            return False
        if self._held[name] != value:
            self._held[name] = value
            self.call_later(self._edited)  # as a widget's change posts its own
        if section_of_name(name) in self._making:  # the widgets are made already: set once mounted
            self._loaded.add(name)
        return True

    def _make(self, section: str, then: Callable[[], None] | None = None) -> None:
        """Make a folded section's widgets from what the form holds (once); `then` runs when they
        are mounted (at once if they were)."""
        names = {f.name for f in fields_in(section)} | {o.name for o in options_in(section)}
        if not names & self._held.keys():
            if then is not None:
                then()
            return
        if section in self._making:
            self._making[section].extend([then] if then else [])
            return
        self._making[section] = [then] if then else []
        contents = self.query_one(f"#section-{section}", Collapsible).query_one(Collapsible.Contents)
        mounted = contents.mount_compose(self._section(section))
        self.call_later(self._made, section, names, contents, mounted)

    async def _made(self, section: str, names: set[str], contents: Widget, mounted: AwaitMount) -> None:
        """A section's widgets are mounted: they take what was loaded meanwhile, and the problems shown."""
        await mounted
        if not contents.children:  # the app closes: nothing was mounted, the form holds on
            self._making.pop(section, None)
            return
        loaded = {name: self._held.pop(name) for name in names if name in self._loaded}
        for name in names:
            self._held.pop(name, None)
        self._loaded -= names
        for name, value in loaded.items():
            if name in FIELD:
                self._show(FIELD[name], value)
            else:
                self._show_option(OPTION[name], value)
        self.show_errors(self._errors)
        for then in self._making.pop(section):
            then()
        self._edited()  # a widget changed while they mounted: said once

    def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        """A section opened before its widgets were made: they are made now."""
        self._make((event.collapsible.id or "").removeprefix("section-"))

    def open_section_of(self, widget: Widget) -> None:
        """Open the section that holds `widget` (a field's entry, its problem line), if folded."""
        for section in widget.ancestors_with_self:
            if isinstance(section, Collapsible) and section.collapsed:
                section.collapsed = False

    def focus_field(self, name: str) -> None:
        """Focus the field `name` (a field of model/fields.py or a run option), its section opened
        (and made first, if it was not yet)."""
        if name in self._held:
            section = section_of_name(name)
            self.query_one(f"#section-{section}", Collapsible).collapsed = False
            self._make(section, then=lambda: self.focus_field(name))
            return
        field = FIELD.get(name)
        if field is None:
            widget = self.query_one(f"#f-{name}")
        elif field.entry == "checks":
            widget = self.query_one(f"#{field.form_id}-{field.choices[0]}")
        else:
            widget = self.query_one(f"#{field.form_id}")
        self.open_section_of(widget)
        widget.focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Whatever brings focus to a field (F6, a key, a click, a problem) opens its section."""
        self.open_section_of(event.widget)

    # ---- reading and writing ------------------------------------------------------------
    def read(self) -> tuple[SdpaConfig | None, dict[str, str]]:
        """The config the form shows, or None with the problem of each bad field."""
        try:
            config = from_entries({field.name: self._value(field) for field in FORM_FIELDS})
        except ConfigError as exc:
            return None, _by_field(exc.errors)
        problems = validate(config, self.app_gpu_memory())
        if problems:
            return None, _by_field(problems)
        return config, {}

    def read_as_typed(self) -> tuple[SdpaConfig | None, dict[str, str]]:
        """The config the form shows when each field is good by itself; the rules across fields
        are not asked (Explain reports them as findings). Else None with each bad field's problem."""
        try:
            config = from_entries({field.name: self._value(field) for field in FORM_FIELDS})
        except ConfigError as exc:
            return None, _by_field(exc.errors)
        own = [FieldError(f.name, m) for f in FORM_FIELDS if (m := f.problem(getattr(config, f.name)))]
        return (None, _by_field(own)) if own else (config, {})

    def app_gpu_memory(self) -> int | None:
        env = getattr(self.app, "environment", None)
        return env.gpu_memory_bytes if env is not None and env.gpu_available else None

    @property
    def options(self) -> RunOptions:
        """The run options the form shows (the regime, the L2 flush, autotune, the peers ticked in
        peers' order, known issues run anyway); the others at their defaults."""
        return options_from({option.name: self._option_value(option) for option in FORM_OPTIONS})

    def load_options(self, options: RunOptions) -> None:
        """Show the form's run options of `options`."""
        values = option_values(options)
        for option in FORM_OPTIONS:
            self._show_option(option, values[option.name])

    def mark_known_issues(self, config: SdpaConfig | None) -> None:
        """Say, before anything runs, which known issues the configuration matches on this engine's
        GPU and cuDNN (known_issues.py), and whether it will run."""
        env = getattr(self.app, "environment", None)
        found = ()
        if config is not None and env and env.gpu_available:
            from ...store.known_issues import recorded as recorded_issues  # once the engine is ready

            found = known_issues.matching(config, env, recorded_issues())
        text = Text(known_issues.marking_words(found, self._option_value(OPTION["run_anyway"])))
        self._say(self.query_one("#known-issue", Label), text, bool(found))

    def load(self, config: SdpaConfig) -> None:
        """Show `config` in the form. Each field set posts its own change; `_edited` turns them
        into one ConfigEdited, since every one of them reads the same finished form."""
        for field in FORM_FIELDS:
            self._show(field, getattr(config, field.name))

    def show_errors(self, errors: dict[str, str]) -> None:
        """Each field's problem on a line below it, the rest below the form; lines of fields
        that are fine again are removed."""
        self._errors = errors
        for field in FORM_FIELDS:
            self._show_error(field, errors.get(field.name, ""))
        by_field = {field.name for field in FORM_FIELDS}
        rest = [m for f, m in errors.items() if f not in by_field]
        self._say(self.query_one("#err-b-memory", Label), "\n".join(rest), bool(rest))

    def _show_error(self, field: Field, message: str) -> None:
        if field.name in self._held:  # shown once its widgets are made (now, with its section open)
            if message:
                self.query_one(f"#section-{field.group}", Collapsible).collapsed = False
                self._make(field.group)
            return
        if field.entry != "checks":
            self.query_one(f"#{field.form_id}").set_class(bool(message), "-invalid")
        line = self._error_lines.get(field.name)
        if line is None and message:  # a field's first problem: its line, kept from then on
            anchor = self.query_one(f"#{field.form_id if field.entry == 'switch' else f'row-{field.name}'}")
            line = Label(message, id=f"err-{field.name}", classes="field-error -visible")
            self._error_lines[field.name] = line
            anchor.parent.mount(line, after=anchor)
        elif line is not None:
            self._say(line, message, bool(message))
        if message:  # a problem is seen: its section opens
            self.open_section_of(
                self.query_one(f"#row-{field.name}" if field.entry != "switch" else f"#{field.form_id}")
            )

    def _say(self, line: Label, words: str | Text, shown: bool) -> None:
        """A problem line's words and whether it shows, each changed only when it differs: a
        Label's update lays the whole screen out, and the form says its lines at every edit."""
        if str(line.content) != str(words):
            line.update(words)
        line.set_class(shown, "-visible")

    # ---- events -------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._edited()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._edited()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self._edited()

    def _edited(self) -> None:
        config, errors = self.read()
        state = (config, errors, self.options)
        if state == self._posted:
            return  # mounting or loading changes every field at once: one message says it all
        self._posted = state
        self.show_errors(errors)
        self.mark_known_issues(config)
        self.post_message(ConfigEdited(*state))


def measured_as(result: RunResult, options: RunOptions) -> RunOptions:
    """`options` as a saved result was measured, as far as it says: its regime and L2 flush, and
    the peers it timed (by the names their adapters give)."""
    forward = result.forward
    asked = {peer.short for peer in forward.field_peers} if forward is not None else set()
    values: dict[str, Any] = {"peers": tuple(k for k, label in peer_labels().items() if label in asked)}
    timed = next((p.timing for p in result.passes if p.timing is not None), None)
    if timed is not None and timed.regime:
        values.update(measured_under(timed))
    return options_from(values, options)
