"""The kinds of value a configuration field takes (fields.py declares which field is which):
each kind knows how a person types it, how it reads back, its own checks and its words."""

from __future__ import annotations

import math
import operator
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .config import SdpaConfig
from .inputs import FORMS as INPUT_FORMS
from .inputs import canonical_inputs
from .lengths import format_lengths, parse_lengths
from .pins import canonical
from .variants import FORMS, canonical_variant

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


@dataclass(frozen=True, eq=False)
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


class Canonical(Field):
    """Text kept in its canonical form (`canon`: what was typed -> that form, or ValueError)."""

    example = ""  # a value, as messages show one

    def canon(self, text: str) -> str:
        raise NotImplementedError

    def coerce(self, value: Any) -> Any:
        if value is None:
            return self.default
        if not isinstance(value, str):
            raise TypeError(self.must(f"text such as {self.example}", value))
        return self.parse(value)

    def parse(self, text: str, config: SdpaConfig | None = None) -> Any:
        if not text.strip():
            return self.default
        try:
            return self.canon(text)
        except ValueError as exc:
            raise ValueError(f"{self.label}: {exc}") from None

    def problem(self, value: Any) -> str | None:
        if value is None and self.default is None:
            return None
        if not isinstance(value, str):
            return self.must(f"text such as {self.example}", value)
        try:
            return None if self.canon(value) == value else self.must(f"written {self.canon(value)!r}", value)
        except ValueError as exc:
            return f"{self.label}: {exc}"

    def format(self, value: Any) -> str:
        return value or ""


class Plan(Canonical):
    """A pinned plan: an engine id and its knobs (pins.py), kept as its canonical text."""

    kind, example = "plan", "1 KERNEL_CFG=27"
    canon = staticmethod(canonical)

    def accepts(self) -> str:
        return "an engine id, then its knobs as NAME=VALUE"


class Modifier(Canonical):
    """A score modifier (variants.py): a name and its parameters, kept as its canonical text."""

    kind, example = "variant", "softcap:50"
    canon = staticmethod(canonical_variant)

    def accepts(self) -> str:
        return FORMS


class InputRecipe(Canonical):
    """An input recipe (inputs.py): seed, magnitudes, fill and strides, kept as its canonical text."""

    kind, example = "inputs", "pad:nan,scale:100"
    canon = staticmethod(canonical_inputs)

    def accepts(self) -> str:
        return INPUT_FORMS
