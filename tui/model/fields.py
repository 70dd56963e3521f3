"""Each configuration field as SdpaConfig declares it: how it is parsed, shown and checked.

A field is declared once, as a dataclass field of SdpaConfig whose metadata says how a person
names it, enters it and reads it back. Everything else derives from that declaration here:
text -> value and value -> text, the field's own messages (type, limits, choices), the dict
round trip of presets and results, and the option table of docs/CLI.md. The CLI builds its
options and the form its widgets from `FIELDS`. Rules that involve several fields live in
validation.py. The metadata keys:

  kind          how the value is entered: int, float, choice, flag, lengths, modes, plan
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
import math
import operator
import reprlib
from collections.abc import Mapping
from typing import Any, ClassVar

from .config import ConfigError, FieldError, SdpaConfig
from .lengths import format_lengths, parse_lengths, with_lengths
from .pins import canonical

GROUPS = ("shape", "masks", "precision", "inference", "timing")  # the form's sections, in order
# each section's title; the form's run options go under timing, their peers in a section of their own
SECTIONS = {"shape": "shape", "masks": "masks", "precision": "precision and training", "inference": "inference",
            "timing": "plans and timing", "peers": "peers"}  # fmt: skip
OPEN_SECTIONS = ("shape", "masks")  # open when the form starts; the others fold

# limit key -> (the words of a message, the sign in the option table, the test a value passes)
_LIMITS = {
    "min": ("at least {}", "≥", operator.ge),
    "above": ("above {}", ">", operator.gt),
    "max": ("at most {}", "≤", operator.le),
    "below": ("below {}", "<", operator.lt),
}


class _Quote(reprlib.Repr):
    """Values as messages quote them: short, whatever was typed (a megabyte, 10**5000, lists in lists)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 60

    def repr_int(self, x: int, level: int) -> str:
        return f"a number of {x.bit_length()} bits" if x.bit_length() > 128 else super().repr_int(x, level)


quote = _Quote().repr


@dataclasses.dataclass(frozen=True, eq=False)
class Field:
    """One declared field. Subclasses are the kinds of value; each knows its text and checks."""

    name: str
    default: Any
    meta: Mapping[str, Any]  # the declaration, as SdpaConfig's field carries it
    label: str  # the field in words, as messages name it
    help: str  # what it means
    group: str  # where the form shows it

    kind: ClassVar[str] = ""
    entry: ClassVar[str] = "text"  # how the form takes it: text, select, switch or checks
    needs_config: ClassVar[bool] = False  # its text means something only against the shape

    @property
    def choices(self) -> tuple:
        return tuple(self.meta.get("choices", ()))

    @property
    def option(self) -> str:
        """The CLI option, as messages name it."""
        return "--" + self.meta.get("flag", self.name).replace("_", "-")

    @property
    def form_label(self) -> str:
        """The form's short words for the field (its label and help are the tooltip)."""
        return self.meta.get("form_label", self.label)

    @property
    def placeholder(self) -> str:
        """What a blank entry stands for, shown in it while blank."""
        return self.meta.get("none", "")

    @property
    def form_id(self) -> str:
        return "f-" + self.meta.get("form_id", self.name)

    def must(self, what: str, value: Any) -> str:
        return f"{self.label} must be {what} (got {quote(value)})"

    # what each kind defines
    def coerce(self, value: Any) -> Any:
        """A typed value (TOML, JSON, a widget, a typed option) -> the field's value; TypeError
        says what is wrong. Range and choice are problem()'s to judge."""
        raise NotImplementedError

    def parse(self, text: str, config: SdpaConfig | None = None) -> Any:
        """What a person typed -> the field's value; ValueError says what is wrong."""
        return self.coerce(text)

    def problem(self, value: Any) -> str | None:
        """The field's own check (type, limits, choices), or None."""
        raise NotImplementedError

    def format(self, value: Any) -> str:
        """The text that parses back to `value`."""
        return str(value)

    def accepts(self) -> str:
        """What the field takes, in words."""
        raise NotImplementedError

    def default_text(self) -> str:
        return self.format(self.default) or self.meta.get("none", "")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: int | float) -> bool:  # 10**400 is a whole number that no float holds
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class Whole(Field):
    kind = "int"
    noun = "a whole number"

    def typed(self, value: Any) -> bool:
        return _whole(value)

    def convert(self, text: str) -> Any:
        return int(text)

    def coerce(self, value: Any) -> Any:
        if value is None and self.default is None:
            return None
        if not self.typed(value):
            raise TypeError(self.must(self.noun, value))
        return value

    def parse(self, text: str, config: SdpaConfig | None = None) -> Any:
        if not text.strip() and not self.meta.get("required"):
            return self.default
        try:
            return self.convert(text.strip())
        except ValueError:
            raise ValueError(self.must(self.noun, text)) from None

    def limits(self) -> list[tuple[str, Any]]:
        return [(key, self.meta[key]) for key in _LIMITS if key in self.meta]

    def problem(self, value: Any) -> str | None:
        if value is None and self.default is None:
            return None
        if not self.typed(value):
            return self.must(self.noun, value)
        for key, limit in self.limits():
            words, _sign, holds = _LIMITS[key]
            if not holds(value, limit):
                what = "a positive number" if (key, limit) == ("above", 0) else words.format(limit)
                return self.must(what, value)
        return None

    def format(self, value: Any) -> str:
        return "" if value is None else str(value)

    def accepts(self) -> str:
        signs = ", ".join(f"{_LIMITS[key][1]} {limit}" for key, limit in self.limits())
        return f"{self.noun.removeprefix('a ')} {signs}".strip()


class Number(Whole):
    kind = "float"
    noun = "a number"

    def typed(self, value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    def convert(self, text: str) -> Any:
        return float(text)

    def coerce(self, value: Any) -> Any:
        value = super().coerce(value)
        if value is not None and not _finite(value):
            raise ValueError(self.must("a finite number", value))
        return None if value is None else float(value)

    def problem(self, value: Any) -> str | None:
        if self.typed(value) and not _finite(value):
            return self.must("a finite number", value)
        return super().problem(value)

    def format(self, value: Any) -> str:
        """The shortest text that reads back the same: 0.1, not 0.1000000000000000055."""
        if value is None:
            return ""
        short = f"{value:g}"
        return short if float(short) == value else repr(value)


def _spelling(text: str) -> str:
    """A choice as people may type it: any case, '-' for '_', ',' or '*' for the 'x' of a shape."""
    return text.strip().lower().replace("-", "_").replace(",", "x").replace("*", "x")


class Choice(Field):
    kind = "choice"
    entry = "select"

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise TypeError(self.must("text", value))
        spelled = _spelling(value)
        for choice in self.choices:
            if _spelling(choice) == spelled:
                return choice
        return self.meta.get("aliases", {}).get(spelled, value.strip())

    def problem(self, value: Any) -> str | None:
        if isinstance(value, str) and value in self.choices:
            return None
        return self.must(f"one of {', '.join(self.choices)}", value)

    def shown(self, choice: str) -> str:
        """A choice as the form lists it."""
        return self.meta.get("choice_labels", {}).get(choice, choice)

    def accepts(self) -> str:
        return ", ".join(self.choices)


class Switch(Field):
    kind = "flag"
    entry = "switch"
    WORDS: ClassVar = dict.fromkeys(("on", "true", "yes"), True) | dict.fromkeys(
        ("off", "false", "no"), False
    )

    @property
    def option_pair(self) -> str:
        """Both CLI flags: `--alibi/--no-alibi`."""
        return f"{self.option}/--no-{self.option.removeprefix('--')}"

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, bool):
            raise TypeError(self.must("true or false", value))
        return value

    def parse(self, text: str, config: SdpaConfig | None = None) -> Any:
        try:
            return self.WORDS[text.strip().lower()]
        except KeyError:
            raise ValueError(self.must("true or false", text)) from None

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else self.must("true or false", value)

    def format(self, value: Any) -> str:
        return "true" if value else "false"

    def accepts(self) -> str:
        return "true, false"


class Lengths(Field):
    """One real length per batch entry (a padding mask); None: every entry is full."""

    kind = "lengths"
    needs_config = True

    def coerce(self, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, list | tuple) or not all(_whole(x) for x in value):
            raise TypeError(self.must("a list of whole numbers", value))
        return tuple(value)

    def parse(self, text: str, config: SdpaConfig | None = None) -> Any:
        config = config or SdpaConfig()
        try:
            return parse_lengths(text, config.b, getattr(config, self.meta["size"]))
        except ValueError as exc:
            raise ValueError(f"{self.label}: {exc}") from None

    def problem(self, value: Any) -> str | None:
        if value is None or (isinstance(value, tuple) and all(_whole(x) for x in value)):
            return None
        return self.must("a list of whole numbers", value)

    def format(self, value: Any) -> str:
        return format_lengths(value)

    def accepts(self) -> str:
        return "full, random, ratio R, or one per batch entry: 512,384,..."


class Modes(Field):
    """Several of the choices, each at most once."""

    kind = "modes"
    entry = "checks"

    def coerce(self, value: Any) -> Any:
        if isinstance(value, str):
            value = [v for v in value.replace("+", ",").split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise TypeError(self.must(f"a list of {', '.join(self.choices)}", value))
        return tuple(v.strip().upper() for v in value)

    def problem(self, value: Any) -> str | None:
        *rest, last = self.choices
        if not isinstance(value, tuple) or not value:
            return f"{self.label} must name at least one of {', '.join(self.choices)}"
        unknown = [v for v in value if v not in self.choices]
        if unknown:  # the label names the modes; one of them is the label less its plural
            return f"unknown {self.label.removesuffix('s')} {quote(unknown[0])} (use {', '.join(rest)} or {last})"
        if len(set(value)) != len(value):
            return f"{self.label} must not repeat"
        return None

    def format(self, value: Any) -> str:
        return ",".join(value)

    def accepts(self) -> str:
        return f"{', '.join(self.choices)}: one or more, comma-separated"


class Plan(Field):
    """A pinned plan: an engine id and its knobs (pins.py), kept as its canonical text."""

    kind = "plan"

    def coerce(self, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise TypeError(self.must("text such as 1 KERNEL_CFG=27", value))
        return self.parse(value)

    def parse(self, text: str, config: SdpaConfig | None = None) -> Any:
        if not text.strip():
            return None
        try:
            return canonical(text)
        except ValueError as exc:
            raise ValueError(f"{self.label}: {exc}") from None

    def problem(self, value: Any) -> str | None:
        if value is None:
            return None
        try:
            if isinstance(value, str) and canonical(value) != value:
                return self.must(f"written {canonical(value)!r}", value)
            return None if isinstance(value, str) else self.must("text such as 1 KERNEL_CFG=27", value)
        except ValueError as exc:
            return f"{self.label}: {exc}"

    def format(self, value: Any) -> str:
        return value or ""

    def accepts(self) -> str:
        return "an engine id, then its knobs as NAME=VALUE"


_KINDS = {kind.kind: kind for kind in (Whole, Number, Choice, Switch, Lengths, Modes, Plan)}
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
