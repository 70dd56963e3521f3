"""The form's widgets of one field or run option, made from its declaration (model/fields.py,
model/options.py): a text entry, a select, a tick, or a row of ticks, with its label and tooltip;
and which of the form's sections each field and option is shown in."""

from __future__ import annotations

from functools import cache
from typing import Any

from textual.app import ComposeResult
from textual.containers import Container, Horizontal
from textual.widgets import Checkbox, Label, Select

from ...model.config import SdpaConfig
from ...model.fields import FIELD, FIELDS, GROUPS, Field
from ...model.options import FORM_OPTIONS, OPTION, Option
from ...model.results import PeerResult
from ..navigation import PaneKeysInput

FORM_FIELDS: tuple[Field, ...] = tuple(
    sorted(FIELDS, key=lambda f: (GROUPS.index(f.group), f.entry == "switch"))
)


class Tick(Checkbox):
    """A checkbox whose mark reads without colour: ✓ when ticked, blank when not."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.BUTTON_INNER = "✓" if self.value else " "

    def watch_value(self) -> None:
        super().watch_value()
        self.BUTTON_INNER = "✓" if self.value else " "


@cache
def peer_labels() -> dict[str, str]:
    """Each peer's key (engine/peers.py) -> its name as the headline says it (FLASH, Flex): the
    name the adapter gives the seed's configuration, without "torch" and the precision. The
    adapters' module is imported when the peers' ticks are first made, not with the first frame."""
    from ...engine.peers import ADAPTERS

    return {key: PeerResult(adapter.name(SdpaConfig())).short for key, adapter in ADAPTERS.items()}


def tip(field: Field) -> str:
    """A field's tooltip: its full name, as messages say it, and what it means."""
    return f"{field.label}: {field.help}"


def section_of(option: Option) -> str:
    """The form's section of a run option: the peers' ticks have their own."""
    return "peers" if option.kind == "peers" else "timing"


def fields_in(section: str) -> tuple[Field, ...]:
    """A section's fields, in the form's order."""
    return tuple(f for f in FORM_FIELDS if f.group == section)


def options_in(section: str) -> tuple[Option, ...]:
    """A section's run options, in their declared order."""
    return tuple(o for o in FORM_OPTIONS if section_of(o) == section)


def section_of_name(name: str) -> str:
    """The section of a field or a form's run option, by its name."""
    return FIELD[name].group if name in FIELD else section_of(OPTION[name])


def entry(field: Field, value: Any):
    """The one widget of a text, select or switch field."""
    if field.entry == "select":
        options = [(field.shown(choice), choice) for choice in field.choices]
        return Select(
            options, value=value, allow_blank=False, id=field.form_id, compact=True, tooltip=tip(field)
        )
    if field.entry == "switch":
        return Tick(field.form_label, value, id=field.form_id, compact=True, tooltip=tip(field))
    tooltip = f"{tip(field)}\n{field.accepts()}" + (
        f"; blank: {field.placeholder}" if field.placeholder else ""
    )
    return PaneKeysInput(
        field.format(value),
        placeholder=field.placeholder,
        id=field.form_id,
        compact=True,
        tooltip=tooltip,
    )


def field_widgets(field: Field, value: Any) -> ComposeResult:
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
                    tooltip=tip(field),
                )
    elif field.entry == "switch":
        yield entry(field, value)
    else:
        with Horizontal(classes="field", id=f"row-{field.name}"):
            yield Label(field.form_label, classes="field-label")
            yield entry(field, value)


def option_widgets(option: Option, value: Any) -> ComposeResult:
    """A run option's widgets (model/options.py declares them): a choice on a row of its own,
    a tick, or a tick a peer under its words."""
    words = option.tip or None
    if option.kind == "choice":
        with Horizontal(classes="field", id=f"row-{option.name}"):
            yield Label(option.form, classes="field-label")
            yield Select([(c, c) for c in option.choices], value=value, allow_blank=False,
                         id=f"f-{option.name}", compact=True, tooltip=words)  # fmt: skip
    elif option.kind == "peers":
        yield Label(option.form, classes="section-label")
        with Container(id="peer-ticks"):
            for key, label in peer_labels().items():
                yield Tick(label, key in value, id=f"f-peer-{key}", compact=True, tooltip=words)
    else:
        yield Tick(option.form, value, id=f"f-{option.name}", compact=True, tooltip=words)
