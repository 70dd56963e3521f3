"""Each configuration field as SdpaConfig declares it: how it is parsed, shown and checked.

A field is declared once, as a dataclass field of SdpaConfig whose metadata says how a person
names it, enters it and reads it back. Everything else derives from that declaration here:
text -> value and value -> text, the field's own messages (type, limits, choices), the dict
round trip of presets and results, and the option table of docs/CLI.md. The CLI builds its
options and the form its widgets from `FIELDS`. Rules that involve several fields live in
validation.py; each kind of value (how it is typed, read back and checked) is kinds.py's. The
metadata keys:

  kind          how the value is entered: int, float, choice, flag, lengths, modes, plan, variant, inputs
  label, help   the field in words, as messages name it; what it means
  group         where the form shows it (one of GROUPS)
  min, max, above, below   limits: inclusive, inclusive, exclusive, exclusive
  required      a blank entry is an error (otherwise blank means the default)
  none          what None stands for (an optional number)
  choices, choice_labels, aliases   the values of a choice or modes field, as the form shows
                them, and other spellings people type
  size          lengths: the sequence length that bounds them
  flag, shorthand   the CLI option when not named after the field; a shorter one shared (`--h`)
  form_label, form_id   the form's short words and widget id where they differ from label and name
  tag, tag_needs, tag_unless   what SdpaConfig.label() says of the field (see there)

Regenerate that table with `python -m tui.model.option_table docs/CLI.md`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .config import ConfigError, FieldError, SdpaConfig
from .kinds import (
    Canonical,
    Choice,
    Field,
    InputRecipe,
    Lengths,
    Modes,
    Modifier,
    Number,
    Plan,
    Switch,
    Whole,
    quote,
)
from .lengths import with_lengths

__all__ = ["FIELD", "FIELDS", "GROUPS", "OPEN_SECTIONS", "SECTIONS", "SHORTHANDS", "Canonical", "Choice", "Field",
           "InputRecipe", "Lengths", "Modes", "Modifier", "Number", "Plan", "Switch", "Whole", "config_from_dict", "from_entries",
           "quote"]  # fmt: skip

GROUPS = ("shape", "masks", "precision", "inference", "timing")  # the form's sections, in order
# each section's title; the form's run options go under timing, their peers in a section of their own
SECTIONS = {"shape": "shape", "masks": "masks", "precision": "precision and training", "inference": "inference",
            "timing": "plans and timing", "peers": "peers"}  # fmt: skip
OPEN_SECTIONS = ("shape", "masks")  # open when the form starts; the others fold

_KINDS = {
    kind.kind: kind for kind in (Whole, Number, Choice, Switch, Lengths, Modes, Plan, Modifier, InputRecipe)
}
FIELDS: tuple[Field, ...] = tuple(
    _KINDS[f.metadata["kind"]](
        f.name, f.default, f.metadata, *(f.metadata[k] for k in ("label", "help", "group"))
    )
    for f in dataclasses.fields(SdpaConfig)
)
FIELD: dict[str, Field] = {f.name: f for f in FIELDS}
# the CLI's shorter options, each setting every field that carries it: --h sets h_q and h_kv, ...
SHORTHANDS: dict[str, tuple[str, ...]] = {
    short: tuple(f.name for f in FIELDS if f.meta.get("shorthand") == short)
    for short in dict.fromkeys(f.meta["shorthand"] for f in FIELDS if "shorthand" in f.meta)
}


# ---- building a config ------------------------------------------------------------------
def _build(values: Mapping[str, Any], base: SdpaConfig, convert) -> SdpaConfig:
    """`base` with `values` converted field by field; every problem at once, each naming its key."""
    errors = [
        FieldError(key, f"unknown key {quote(key)} (known keys: {', '.join(sorted(FIELD))})")
        for key in values
        if key not in FIELD
    ]
    converted: dict[str, Any] = {}
    for key, value in values.items():
        if key in FIELD:
            try:
                converted[key] = convert(FIELD[key], value)
            except (TypeError, ValueError) as exc:
                errors.append(FieldError(key, str(exc)))
    if errors:
        raise ConfigError(errors)
    return base.replace(**converted)


def config_from_dict(data: Mapping[str, Any], base: SdpaConfig | None = None) -> SdpaConfig:
    """Typed values (TOML, JSON) over `base` (the defaults when None): each type-checked and its
    spelling normalised; unknown keys and wrong types are errors that name the key. Whether the
    values make sense together is validation.validate()'s job."""
    return _build(data, base or SdpaConfig(), lambda f, v: f.coerce(v))


def from_entries(values: Mapping[str, Any], base: SdpaConfig | None = None) -> SdpaConfig:
    """What a person entered (the form, the CLI) over `base`: text is parsed, other values
    type-checked. Lengths are read against the shape entered with them, and given one side,
    the other side is full."""
    base = base or SdpaConfig()
    later = {k: v for k, v in values.items() if k in FIELD and FIELD[k].needs_config and isinstance(v, str)}
    now = {k: v for k, v in values.items() if k not in later}
    config = _build(now, base, lambda f, v: f.parse(v) if isinstance(v, str) else f.coerce(v))
    if later:
        _counts_first(config)
    config = _build(later, config, lambda f, v: f.parse(v, config))
    return with_lengths(config, config.seq_lens_q, config.seq_lens_kv)


def _counts_first(config: SdpaConfig) -> None:
    """Typed lengths are made one per batch entry, within their side's length: b and those lengths
    are checked first, at their fields, so that b=10**9 is refused before 10**9 lengths are made."""
    names = ("b", *(f.meta["size"] for f in FIELDS if isinstance(f, Lengths)))
    errors = [FieldError(n, message) for n in names if (message := FIELD[n].problem(getattr(config, n)))]
    if errors:
        raise ConfigError(errors)
