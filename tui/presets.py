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
is shown as the user's. A broken file is reported with its name, the key and the line, and
every other preset still loads.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from .engine.config import ConfigError, SdpaConfig
from .engine.results import REGIMES
from .files import atomic_write

PRESET_KEYS = ("description", "source", "config", "timing")
TIMING_KEYS = ("regime",)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


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
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "presets", here / "_builtin_presets"):
        if candidate.is_dir():
            return candidate
    return here.parent / "presets"


def user_dir() -> Path:
    override = os.environ.get("SDPA_EXPLORER_PRESET_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("sdpa-explorer", appauthor=False)) / "presets"


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^[ \t]*{re.escape(key)}[ \t]*=", re.M)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def load_file(path: Path, origin: str) -> tuple[Preset | None, list[PresetProblem]]:
    """One preset file -> (preset, []) or (None, what is wrong with it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [PresetProblem(str(path), f"cannot be read: {exc}")]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        if line is None:
            m = re.search(r"line (\d+)", str(exc))
            line = int(m.group(1)) if m else None
        return None, [PresetProblem(str(path), f"not valid TOML: {exc}", line=line)]
    problems = [
        PresetProblem(str(path), f"unknown key (known: {', '.join(PRESET_KEYS)})", key, _line_of(text, key))
        for key in data
        if key not in PRESET_KEYS
    ]
    for key in ("description", "source"):
        if key in data and not isinstance(data[key], str):
            problems.append(PresetProblem(str(path), "must be text", key, _line_of(text, key)))
    config_data = data.get("config", {})
    if not isinstance(config_data, dict):
        problems.append(
            PresetProblem(str(path), "must be a table ([config])", "config", _line_of(text, "config"))
        )
        config_data = {}
    timing, trouble = _timing_of(data.get("timing", {}), path, text)
    problems += trouble
    config = None
    try:
        config = SdpaConfig.from_dict(config_data)
    except ConfigError as exc:
        problems += [
            PresetProblem(str(path), e.message, e.field, _line_of(text, e.field)) for e in exc.errors
        ]
    if config is not None:
        problems += [
            PresetProblem(str(path), e.message, e.field, _line_of(text, e.field)) for e in config.validate()
        ]
    if problems:
        return None, problems
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


def _timing_of(table: object, path: Path, text: str) -> tuple[dict, list[PresetProblem]]:
    """The optional [timing] table: its keys, each checked, or what is wrong with them."""
    if not isinstance(table, dict):
        return {}, [
            PresetProblem(str(path), "must be a table ([timing])", "timing", _line_of(text, "timing"))
        ]
    problems = [
        PresetProblem(
            str(path), f"unknown key in [timing] (known: {', '.join(TIMING_KEYS)})", key, _line_of(text, key)
        )
        for key in table
        if key not in TIMING_KEYS
    ]
    regime = table.get("regime", "")
    if "regime" in table and regime not in REGIMES:
        message = f"must be one of {', '.join(REGIMES)} (got {regime!r})"
        problems.append(PresetProblem(str(path), message, "regime", _line_of(text, "regime")))
    return ({"regime": regime} if regime in REGIMES else {}), problems


def load_all() -> tuple[dict[str, Preset], list[PresetProblem]]:
    """Every preset by name (user presets win over built-ins of the same name), and the problems."""
    presets: dict[str, Preset] = {}
    problems: list[PresetProblem] = []
    for origin, folder in (("builtin", builtin_dir()), ("user", user_dir())):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            preset, trouble = load_file(path, origin)
            problems += trouble
            if preset is None:
                continue
            if origin == "user" and preset.name in presets:
                preset = Preset(**{**preset.__dict__, "shadows_builtin": True})
            presets[preset.name] = preset
    return presets, problems


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
    """Save into the user's folder, atomically (a crash never leaves a half-written preset).
    Built-ins are never written: a user preset of the same name shadows one instead."""
    if not _NAME_RE.match(name):
        raise ValueError(
            f"preset name {name!r} must start with a letter or digit and use only letters, digits, '.', '_', '-'"
        )
    folder = user_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.toml"
    if target.exists() and not overwrite:
        raise PresetExists(f"a user preset named {name!r} exists ({target})")
    description = description or f"saved from sdpa-explorer: {config.label()}"
    return atomic_write(target, to_toml(config, description, regime=regime))
