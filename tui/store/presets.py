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
of at most 1 MiB are read (a FIFO or /dev/zero in the folder is reported, never read).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from ..model.config import ConfigError, SdpaConfig
from ..model.fields import config_from_dict
from ..model.statuses import REGIMES
from ..model.validation import validate
from .files import atomic_write, kind_words, sweep_stale

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
        where = Path(self.path).name
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


def read_text(path: Path) -> tuple[str | None, str]:
    """The text of a regular file of at most MAX_BYTES, a byte-order mark dropped; else None and
    why. A FIFO would hang the read and /dev/zero never end it, so neither is opened for reading."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            return None, f"not a regular file ({kind_words(mode)}); only files are read"
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped since the look
                return None, "not a regular file; only files are read"
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    if len(data) > MAX_BYTES:
        return None, f"larger than {MAX_BYTES // 1024 // 1024} MiB; a preset is a few lines"
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (at byte {exc.start})"


def _parse(text: str) -> tuple[dict | None, str, int | None]:
    """TOML text -> (data, '', None), or (None, what is wrong, its line)."""
    try:
        return tomllib.loads(text), "", None
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        if line is None:
            m = re.search(r"line (\d+)", str(exc))
            line = int(m.group(1)) if m else None
        return None, f"not valid TOML: {exc}", line
    except RecursionError:  # tomllib recurses once per level of nesting
        return None, "arrays or tables nested too deeply to read", None


def load_file(path: Path, origin: str) -> tuple[Preset | None, list[PresetProblem]]:
    """One preset file -> (preset, []) or (None, what is wrong with it: the first few problems
    and, after them, how many more there are)."""
    text, why = read_text(path)
    if text is None:
        return None, [PresetProblem(str(path), why)]
    data, why, line = _parse(text)
    if data is None:
        return None, [PresetProblem(str(path), why, line=line)]
    config, timing, found = _checked(data)
    if found:
        return None, _located(path, text, found)
    return (
        Preset(
            name=path.stem,
            config=config,
            description=data.get("description", ""),
            source=data.get("source", ""),
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
    config = None
    try:
        config = config_from_dict(config_data)
    except ConfigError as exc:
        found += [(e.field, e.message) for e in exc.errors]
    if config is not None:
        found += [(e.field, e.message) for e in validate(config)]
    return config, timing, found


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
    broken = [p for p in problems if Path(p.path).stem == name]
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
