"""Presets: real models' attention shapes (built in) and the user's own (saved as TOML).

A preset file is TOML a person can edit by hand:

    description = "what model this stands for"
    source = "where the numbers come from"
    [config]
    b = 4
    ...                      # any SdpaConfig field; missing ones take the defaults
    [timing]                 # optional: how its figures are taken
    regime = "sustained"     # burst (the default) or sustained

Built-ins live in the project's presets/ folder; user presets in the user's config folder
(platformdirs; SDPA_EXPLORER_PRESET_DIR overrides it). A user preset with a built-in's name
is shown as the user's. A broken file is reported with its name, the key and the line (its
first few problems and how many more), and every other preset still loads; only regular files
of at most 1 MiB whose keys nest at most 16 levels are read (store/reading.py: a FIFO or
/dev/zero in the folder is reported, never read, and a key of 100,000 dotted parts is refused
before tomllib spends minutes on it). Names and descriptions are kept as a terminal may show
them: a character that is not printable (an escape sequence) is written as its escape.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from ..model.config import ConfigError, SdpaConfig
from ..model.fields import config_from_dict
from ..model.statuses import REGIMES
from ..model.validation import validate
from .files import atomic_write, sweep_stale
from .reading import ParseError, ReadError, printable, read_toml

PRESET_KEYS = ("description", "source", "config", "timing")
TIMING_KEYS = ("regime",)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_BYTES = 1 << 20  # a preset is a few hundred bytes; anything this big is not one
MAX_PROBLEMS = 5  # per file: the first few problems, then how many more


@dataclass(frozen=True)
class Preset:
    name: str
    config: SdpaConfig
    description: str = ""
    source: str = ""
    origin: str = "builtin"  # "builtin" or "user"
    path: str = ""
    shadows_builtin: bool = False  # a user preset that hides a built-in of the same name
    regime: str = ""  # the timing regime it asks for ('' : whatever the user chose)


@dataclass(frozen=True)
class PresetProblem:
    """A preset file that could not be loaded, said so a user can find and fix it."""

    path: str
    message: str
    key: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = printable(Path(self.path).name)
        if self.line is not None:
            where += f", line {self.line}"
        if self.key:
            where += f", key {self.key!r}"
        return f"{where}: {self.message}"


class PresetExists(FileExistsError):
    """Saving would overwrite a user preset; ask the user, then save with overwrite=True."""


def builtin_dir() -> Path:
    """presets/ beside the package in a checkout; the copy inside the package when installed."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "presets", package / "_builtin_presets"):
        if candidate.is_dir():
            return candidate
    return package.parent / "presets"


def user_dir() -> Path:
    override = os.environ.get("SDPA_EXPLORER_PRESET_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("sdpa-explorer", appauthor=False)) / "presets"


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^[ \t]*([\"']?){re.escape(key)}\1[ \t]*=", re.M)  # bare or quoted
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _short(text: str, limit: int = 60) -> str:
    """A key or a value as a message quotes it: a 1 MiB key is not repeated in every problem."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_file(path: Path, origin: str) -> tuple[Preset | None, list[PresetProblem]]:
    """One preset file -> (preset, []) or (None, what is wrong with it: the first few problems
    and, after them, how many more there are)."""
    try:
        data, text = read_toml(path, MAX_BYTES)
    except ReadError as exc:
        unopened = isinstance(exc.__cause__, OSError)  # the system's refusal: missing, no permission
        return None, [PresetProblem(str(path), f"cannot be read: {exc.why}" if unopened else exc.why)]
    except ParseError as exc:
        return None, [PresetProblem(str(path), exc.why, line=exc.line)]
    config, timing, found = _checked(_as_written(data))
    if found:
        return None, _located(path, text, found)
    return (
        Preset(
            name=printable(path.stem),  # found by the name it is shown with (ESC as \x1b)
            config=config,
            description=printable(data.get("description", "")),
            source=printable(data.get("source", "")),
            origin=origin,
            path=str(path),
            regime=timing.get("regime", ""),
        ),
        [],
    )


def _checked(data: dict) -> tuple[SdpaConfig | None, dict, list[tuple[str, str]]]:
    """A parsed preset -> its configuration, its [timing], and its problems as (key, message)."""
    found = [
        (key, f"unknown key (known: {', '.join(PRESET_KEYS)})") for key in data if key not in PRESET_KEYS
    ]
    found += [
        (key, "must be text") for key in ("description", "source") if not isinstance(data.get(key, ""), str)
    ]
    config_data = data.get("config", {})
    if not isinstance(config_data, dict):
        found.append(("config", "must be a table ([config])"))
        config_data = {}
    timing, trouble = _timing_of(data.get("timing", {}))
    found += trouble
    config, unread = _config_of(config_data)
    found += unread
    if config is not None:
        bad = {key for key, _ in unread}
        found += [(e.field, e.message) for e in validate(config) if e.field not in bad]
    return (None if unread else config), timing, found


def _config_of(table: dict) -> tuple[SdpaConfig | None, list[tuple[str, str]]]:
    """[config] as a configuration, and the keys that did not read; those left out, the rest
    still make one, so that its validation's problems are said with theirs."""
    try:
        return config_from_dict(table), []
    except ConfigError as exc:
        unread = [(e.field, e.message) for e in exc.errors]
    bad = {key for key, _ in unread}
    try:
        return config_from_dict({k: v for k, v in table.items() if k not in bad}), unread
    except ConfigError:
        return None, unread


class _Date(datetime.date):
    __repr__ = datetime.date.isoformat


class _DateTime(datetime.datetime):
    __repr__ = datetime.datetime.isoformat


class _Time(datetime.time):
    __repr__ = datetime.time.isoformat


def _as_written(value: Any) -> Any:
    """TOML's dates and times quoted in a message as written (1979-05-27), not as Python
    spells them (datetime.date(1979, 5, 27)); everything else as it is."""
    if isinstance(value, dict):
        return {k: _as_written(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_written(v) for v in value]
    if isinstance(value, datetime.datetime):
        return _DateTime(*value.timetuple()[:6], value.microsecond, value.tzinfo)
    if isinstance(value, datetime.date):
        return _Date(value.year, value.month, value.day)
    if isinstance(value, datetime.time):
        return _Time(value.hour, value.minute, value.second, value.microsecond, value.tzinfo)
    return value


def _located(path: Path, text: str, found: list[tuple[str, str]]) -> list[PresetProblem]:
    """The first MAX_PROBLEMS problems, each with its line, then a count of the rest: a file of
    10,000 wrong keys is one file to fix, not 10,000 messages."""
    problems = [
        PresetProblem(str(path), message, _short(str(key)), _line_of(text, str(key)))
        for key, message in found[:MAX_PROBLEMS]
    ]
    more = len(found) - MAX_PROBLEMS
    if more > 0:
        problems.append(PresetProblem(str(path), f"and {more:,} more problem{'s' * (more > 1)} in this file"))
    return problems


def _timing_of(table: object) -> tuple[dict, list[tuple[str, str]]]:
    """The optional [timing] table: its keys, each checked, or what is wrong with them."""
    if not isinstance(table, dict):
        return {}, [("timing", "must be a table ([timing])")]
    found = [
        (key, f"unknown key in [timing] (known: {', '.join(TIMING_KEYS)})")
        for key in table
        if key not in TIMING_KEYS
    ]
    regime = table.get("regime", "")
    if "regime" in table and regime not in REGIMES:
        found.append(("regime", f"must be one of {', '.join(REGIMES)} (got {_short(repr(regime))})"))
    return ({"regime": regime} if regime in REGIMES else {}), found


def load_all() -> tuple[dict[str, Preset], list[PresetProblem]]:
    """Every preset by name (user presets win over built-ins of the same name), and the problems."""
    presets: dict[str, Preset] = {}
    problems: list[PresetProblem] = []
    for origin, folder in (("builtin", builtin_dir()), ("user", user_dir())):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            preset, trouble = _load_guarded(path, origin)
            problems += trouble
            if preset is None:
                continue
            if origin == "user" and preset.name in presets:
                preset = Preset(**{**preset.__dict__, "shadows_builtin": True})
            presets[preset.name] = preset
    return presets, problems


def listing(found: dict[str, Preset], problems: list[PresetProblem]) -> dict:
    """The presets and the problems as `presets --json` prints them."""
    keys = ("name", "origin", "shadows_builtin", "description", "source", "path")
    return {
        "presets": [
            {**{k: getattr(p, k) for k in keys}, "config": p.config.to_dict()} for p in found.values()
        ],
        "problems": [str(p) for p in problems],
    }


def problem_lines(problems: list[PresetProblem], most: int, then: str = "") -> list[str]:
    """The first `most` problems as lines, then how many more (and `then`, what shows them all)."""
    lines = [str(p) for p in problems[:most]]
    more = len(problems) - most
    if more > 0:
        lines.append(f"... and {more:,} more" + (f"; {then}" if then else ""))
    return lines


def _load_guarded(path: Path, origin: str) -> tuple[Preset | None, list[PresetProblem]]:
    """load_file, and should checking one file fail in a way nobody foresaw, that file's problem
    rather than every preset lost: presets are read at every start-up and every `run --preset`."""
    try:
        return load_file(path, origin)
    except Exception as exc:  # one bad file must not hide the others
        return None, [PresetProblem(str(path), f"{GUARD_WORDS} ({type(exc).__name__}: {_short(str(exc))})")]


GUARD_WORDS = "could not be checked"


def find(name: str) -> Preset:
    """The preset called `name`; KeyError names the ones there are, ValueError says why it is broken."""
    presets, problems = load_all()
    if name in presets:
        return presets[name]
    broken = [p for p in problems if printable(Path(p.path).stem) == name]
    if broken:
        raise ValueError("; ".join(str(p) for p in broken))
    raise KeyError(f"no preset named {name!r} (there are: {', '.join(sorted(presets)) or 'none'})")


def to_toml(config: SdpaConfig, description: str = "", source: str = "", regime: str = "") -> str:
    data: dict = {}
    if description:
        data["description"] = description
    if source:
        data["source"] = source
    data["config"] = config.to_dict()
    if regime:
        data["timing"] = {"regime": regime}
    return tomli_w.dumps(data)


def save_user(
    name: str, config: SdpaConfig, description: str = "", overwrite: bool = False, regime: str = ""
) -> Path:
    """Save into the user's folder, atomically (a crash never leaves a half-written preset), and
    without `overwrite` only if the name is free at that instant. Built-ins are never written: a
    user preset of the same name shadows one instead."""
    if not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"preset name {name!r} must start with a letter or digit and use only letters, digits, '.', '_', '-'"
        )
    folder = user_dir()
    folder.mkdir(parents=True, exist_ok=True)  # the tool's own folder
    sweep_stale(folder)  # what a killed save left behind
    target = folder / f"{name}.toml"
    description = description or f"saved from sdpa-explorer: {config.label()}"
    try:
        return atomic_write(target, to_toml(config, description, regime=regime), exclusive=not overwrite)
    except FileExistsError as exc:  # exclusive: of two saves of one name, exactly one wins
        raise PresetExists(f"a user preset named {name!r} exists ({target})") from exc
