"""The configuration form: every field validated as typed, the problem shown at the field.

The widgets come from the fields' declarations (model/fields.py): a text entry, a select, a
switch or a row of checks. A field's problem is a line below it while the problem lasts
(made at its first problem, hidden when it is fixed: thirty lines made up front would cost
every start-up and restyle for nothing). Fields are shown by group, a section that folds each
(the shape and the masks open at first); in a group the labelled rows come first, then its
switches. A field that takes focus, or shows a problem, opens its section.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Container, Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Checkbox, Collapsible, Input, Label, Select

from ...engine.peers import ADAPTERS
from ...model import known_issues
from ...model.config import ConfigError, FieldError, SdpaConfig
from ...model.fields import FIELD, FIELDS, GROUPS, OPEN_SECTIONS, SECTIONS, Field, from_entries
from ...model.options import FORM_OPTIONS, Option, RunOptions, option_values, options_from
from ...model.results import PeerResult, RunResult
from ...model.validation import validate
from ..messages import ConfigEdited
from ..navigation import PaneKeysInput


class Tick(Checkbox):
    """A checkbox whose mark reads without colour: ✓ when ticked, blank when not."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.BUTTON_INNER = "✓" if self.value else " "

    def watch_value(self) -> None:
        super().watch_value()
        self.BUTTON_INNER = "✓" if self.value else " "


FORM_FIELDS: tuple[Field, ...] = tuple(
    sorted(FIELDS, key=lambda f: (GROUPS.index(f.group), f.entry == "switch"))
)
_WIDGETS = {"text": Input, "select": Select, "switch": Checkbox}

# each peer's key (engine/peers.py) -> its name as the headline says it (FLASH, Flex): the name
# the adapter gives the seed's configuration, without "torch" and the precision
PEER_LABELS = {key: PeerResult(adapter.name(SdpaConfig())).short for key, adapter in ADAPTERS.items()}


def _tip(field: Field) -> str:
    """A field's tooltip: its full name, as messages say it, and what it means."""
    return f"{field.label}: {field.help}"


def _section_of(option: Option) -> str:
    """The form's section of a run option: the peers' ticks have their own."""
    return "peers" if option.kind == "peers" else "timing"


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

    # ---- the widgets of one field --------------------------------------------------------
    @staticmethod
    def _entry(field: Field, value: Any):
        """The one widget of a text, select or switch field."""
        if field.entry == "select":
            options = [(field.shown(choice), choice) for choice in field.choices]
            return Select(
                options, value=value, allow_blank=False, id=field.form_id, compact=True, tooltip=_tip(field)
            )
        if field.entry == "switch":
            return Tick(field.form_label, value, id=field.form_id, compact=True, tooltip=_tip(field))
        tooltip = f"{_tip(field)}\n{field.accepts()}" + (
            f"; blank: {field.placeholder}" if field.placeholder else ""
        )
        return PaneKeysInput(
            field.format(value),
            placeholder=field.placeholder,
            id=field.form_id,
            compact=True,
            tooltip=tooltip,
        )

    @classmethod
    def _field(cls, field: Field, value: Any) -> ComposeResult:
        """A field's widgets; the last of them carries the id its problem line is placed after."""
        if field.entry == "checks":
            yield Label(field.form_label, classes="section-label")
            with Container(classes="checks", id=f"row-{field.name}"):
                for choice in field.choices:
                    yield Tick(
                        choice,
                        choice in value,
                        id=f"{field.form_id}-{choice}",
                        compact=True,
                        tooltip=_tip(field),
                    )
        elif field.entry == "switch":
            yield cls._entry(field, value)
        else:
            with Horizontal(classes="field", id=f"row-{field.name}"):
                yield Label(field.form_label, classes="field-label")
                yield cls._entry(field, value)

    @staticmethod
    def _run_option(option: Option) -> ComposeResult:
        """A run option's widgets (model/options.py declares them): a choice on a row of its own,
        a tick, or a tick a peer under its words."""
        tip = option.tip or None
        if option.kind == "choice":
            with Horizontal(classes="field", id=f"row-{option.name}"):
                yield Label(option.form, classes="field-label")
                yield Select([(c, c) for c in option.choices], value=option.default, allow_blank=False,
                             id=f"f-{option.name}", compact=True, tooltip=tip)  # fmt: skip
        elif option.kind == "peers":
            yield Label(option.form, classes="section-label")
            with Container(id="peer-ticks"):
                for key, label in PEER_LABELS.items():
                    yield Tick(label, False, id=f"f-peer-{key}", compact=True, tooltip=tip)
        else:
            yield Tick(option.form, option.default, id=f"f-{option.name}", compact=True, tooltip=tip)

    def _value(self, field: Field) -> Any:
        """What the field's widgets hold: text to parse, a choice, on/off, or the checked modes."""
        if field.entry == "checks":
            return tuple(c for c in field.choices if self.query_one(f"#{field.form_id}-{c}", Checkbox).value)
        return self.query_one(f"#{field.form_id}", _WIDGETS[field.entry]).value

    def _show(self, field: Field, value: Any) -> None:
        if field.entry == "checks":
            for choice in field.choices:
                self.query_one(f"#{field.form_id}-{choice}", Checkbox).value = choice in value
        else:
            widget = self.query_one(f"#{field.form_id}", _WIDGETS[field.entry])
            widget.value = field.format(value) if field.entry == "text" else value

    def compose(self) -> ComposeResult:
        for section, title in SECTIONS.items():
            folded = section not in OPEN_SECTIONS  # its class given now: set at mount, it restyled the form
            with Collapsible(
                title=title, collapsed=folded, id=f"section-{section}", classes="-collapsed" * folded
            ):
                for field in FORM_FIELDS:
                    if field.group == section:
                        yield from self._field(field, getattr(self._initial, field.name))
                for option in FORM_OPTIONS:
                    if _section_of(option) == section:
                        yield from self._run_option(option)
        yield Label("", id="known-issue", classes="field-error")  # the known issues the form matches
        yield Label("", id="err-b-memory", classes="field-error")  # problems of no one field

    # ---- the sections --------------------------------------------------------------------
    def open_section_of(self, widget: Widget) -> None:
        """Open the section that holds `widget` (a field's entry, its problem line), if folded."""
        for section in widget.ancestors_with_self:
            if isinstance(section, Collapsible) and section.collapsed:
                section.collapsed = False

    def focus_field(self, name: str) -> None:
        """Focus the field `name` (a field of model/fields.py or a run option), its section opened."""
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
        PEER_LABELS' order, known issues run anyway); the others at their defaults."""
        values: dict[str, Any] = {}
        for option in FORM_OPTIONS:
            if option.kind == "peers":
                ticked = (key for key in PEER_LABELS if self.query_one(f"#f-peer-{key}", Checkbox).value)
                values[option.name] = tuple(ticked)
            else:
                values[option.name] = self.query_one(
                    f"#f-{option.name}", Select if option.kind == "choice" else Checkbox
                ).value
        return options_from(values)

    def load_options(self, options: RunOptions) -> None:
        """Show the form's run options of `options`."""
        values = option_values(options)
        for option in FORM_OPTIONS:
            if option.kind == "peers":
                for key in PEER_LABELS:
                    self.query_one(f"#f-peer-{key}", Checkbox).value = key in values[option.name]
            else:
                kind = Select if option.kind == "choice" else Checkbox
                self.query_one(f"#f-{option.name}", kind).value = values[option.name]

    def mark_known_issues(self, config: SdpaConfig | None) -> None:
        """Say, before anything runs, which known issues the configuration matches on this engine's
        GPU and cuDNN (known_issues.py), and whether it will run."""
        env = getattr(self.app, "environment", None)
        found = known_issues.matching(config, env) if config is not None and env and env.gpu_available else ()
        anyway = self.query_one("#f-run_anyway", Checkbox).value
        verdict = "runs anyway (ticked)" if anyway else "not run unless ticked"
        text = Text("\n".join(f"known issue: {i.summary}" for i in found) + (f"; {verdict}" if found else ""))
        self._say(self.query_one("#known-issue", Label), text, bool(found))

    def load(self, config: SdpaConfig) -> None:
        """Show `config` in the form. Each field set posts its own change; `_edited` turns them
        into one ConfigEdited, since every one of them reads the same finished form."""
        for field in FORM_FIELDS:
            self._show(field, getattr(config, field.name))

    def show_errors(self, errors: dict[str, str]) -> None:
        """Each field's problem on a line below it, the rest below the form; lines of fields
        that are fine again are removed."""
        for field in FORM_FIELDS:
            self._show_error(field, errors.get(field.name, ""))
        by_field = {field.name for field in FORM_FIELDS}
        rest = [m for f, m in errors.items() if f not in by_field]
        self._say(self.query_one("#err-b-memory", Label), "\n".join(rest), bool(rest))

    def _show_error(self, field: Field, message: str) -> None:
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
    values: dict[str, Any] = {"peers": tuple(k for k, label in PEER_LABELS.items() if label in asked)}
    timed = next((p.timing for p in result.passes if p.timing is not None), None)
    if timed is not None and timed.regime:
        values.update(l2_flush=timed.l2_flushed, regime=timed.regime)
    return options_from(values, options)
