"""The options of the commands, derived from the declarations: one a configuration field (as
model/fields.py declares it), and the run options (as model/options.py declares them)."""

from __future__ import annotations

from typing import Any

import click

from ..engine.peers import parse_peers
from ..model.config import ConfigError, FieldError, SdpaConfig
from ..model.fields import FIELD, FIELDS, SHORTHANDS, Choice, Field, Switch, from_entries, quote
from ..model.options import MEASURED, OPTION, OPTIONS, PEER_KEYS, PLANS, Option, RunOptions, options_from
from ..model.statuses import REGIME_BURST
from ..model.validation import validate
from .common import fail_usage, preset_config

_CLICK_TYPES = {"int": click.INT, "float": click.FLOAT}


def _click_type(field: Field) -> click.ParamType:
    if isinstance(field, Choice):
        return click.Choice(field.choices, case_sensitive=False)
    return _CLICK_TYPES.get(field.kind, click.STRING)  # other kinds parse their own text


def _option(field: Field):
    """The click option of a declared field. Its default is None, so that only what is given
    overrides the preset."""
    helptext = f"{field.help} (default {field.default_text()})"
    if isinstance(field, Switch):
        return click.option(field.option_pair, field.name, default=None, help=helptext)
    kind = _click_type(field)
    metavar = field.kind.upper() if kind is click.STRING else None  # LENGTHS, MODES
    return click.option(field.option, field.name, type=kind, metavar=metavar, help=helptext)


def config_options(fn, preset: Any = None):
    """One option per configuration field, as the field declares it, plus the seed's
    shorthands (--h sets h_q and h_kv, ...) and --preset to start from (or `preset`, another)."""
    opts = [
        preset
        or click.option(
            "--preset", help="start from this preset (see `sdpa-explorer presets`); options override it"
        ),
        *(
            click.option(
                f"--{short}", short, type=_click_type(FIELD[names[0]]), help=f"sets {' and '.join(names)}"
            )
            for short, names in SHORTHANDS.items()
        ),
        *(_option(field) for field in FIELDS),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def config_from_options(values: dict) -> SdpaConfig:
    """Options -> SdpaConfig: the preset (or the seed's configuration), then shorthands, then
    fields. Any problem exits 2, each message naming the option that gave the field."""
    given, options = entered(values)
    try:
        config = from_entries(given, base_config(values))
    except ConfigError as exc:
        fail_usage(by_option(exc.errors, options))
    errors = validate(config)
    if errors:
        fail_usage(by_option(errors, options))
    return config


def base_config(values: dict) -> SdpaConfig | None:
    """The preset the options start from (None: the seed's configuration)."""
    return preset_config(values["preset"]) if values.get("preset") is not None else None


def entered(values: dict) -> tuple[dict, dict[str, str]]:
    """The fields the options give (a shorthand's fields, then the fields' own options over them)
    and, for each, the option the user typed for it: --s, where --s gave s_q and s_kv."""
    given: dict = {}
    options: dict[str, str] = {}
    for short, names in SHORTHANDS.items():
        if values.get(short) is not None:
            given.update(dict.fromkeys(names, values[short]))
            options.update(dict.fromkeys(names, f"--{short}"))
    for f in FIELDS:
        if values.get(f.name) is not None:
            given[f.name], options[f.name] = values[f.name], f.option
    return given, options


def by_option(errors: list[FieldError], options: dict[str, str] | None = None) -> list[str]:
    """Each problem as a line naming its option: the one typed for its field (`options`, as
    entered() says), else the field's own."""
    options = options or {}
    return [
        f"{options.get(e.field) or (FIELD[e.field].option if e.field in FIELD else e.field)}: {e.message}"
        for e in errors
    ]


def preset_regimes() -> dict[str, str]:
    """The regime each preset asks for, by name ('' where it names none)."""
    from ..store.presets import load_all

    return {name: preset.regime for name, preset in load_all()[0].items()}


# ---- the run options (model/options.py declares them), as each command takes them ---------
def _run_option(option: Option):
    """The click option of a declared run option; its parameter is the option's name."""
    kw: dict[str, Any] = {"help": option.help}
    if option.kind == "switch":
        both = "/" in option.flag  # --x/--no-x; a lone flag (--run-anyway) is only ever given
        kw.update(default=option.default, **({"show_default": True} if both else {"is_flag": True}))
    elif option.kind == "int":
        kw.update(default=option.default, show_default=True, type=click.INT, callback=_within(option))
    elif option.kind == "choice":  # None: the command's default (the preset's regime)
        kw.update(default=None, type=click.Choice(option.choices, case_sensitive=False))
    else:  # peers
        kw.update(default="", metavar="LIST", callback=_parse_peers)
    return click.option(option.flag, option.name, **kw)


def _run_options_of(*names: str):
    def add(fn):
        for name in reversed(names):
            fn = _run_option(OPTION[name])(fn)
        return fn

    return add


def _run_options_in(group: str):
    """The run options of a group of commands (Option.cli), in their declared order."""
    return _run_options_of(*(o.name for o in OPTIONS if o.cli == group))


# the commands that measure (run, check, sweep); those that run plans (run, sweep); --peers;
# --no-history (run, check, sweep: each keeps what it measures in the run history); --cross-check
# (run, sweep and check: the fp64 check of each output)
timing_options = _run_options_in(MEASURED)
measure_options = _run_options_in(PLANS)
cross_check_option = _run_options_of("cross_check")
peers_option = _run_options_of("peers")
history_option = _run_options_of("no_history")


def regime_of(values: dict[str, Any], regimes: dict[str, str] | None = None) -> str:
    """--regime, else the preset's (`regimes`: preset_regimes(), read once for many), else burst."""
    if values.get("regime"):
        return values["regime"]
    preset = values.get("preset")
    return (preset and (regimes if regimes is not None else preset_regimes()).get(preset, "")) or REGIME_BURST


def run_options(values: dict[str, Any], **given: Any) -> RunOptions:
    """The run options of a command's values (its parameters, by option name), `given` over them."""
    return options_from({**values, **given})


def _within(option: Option):
    """An int option's check, as click parses it: a value past its bounds exits 2 on one line."""

    def check(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
        if problem := option.problem(value):
            fail_usage([f"{option.flag}: {problem}"])
        return value

    return check


def _parse_peers(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    if not value:
        return ()
    words = [w.strip().lower() for w in value.split(",") if w.strip()]
    if "all" in words and len(words) > 1:
        fail_usage([f"--peers: all stands alone (every peer), not in a list: give all, or names of "
                    f"{', '.join(PEER_KEYS)} (got {quote(value)})"])  # fmt: skip
    try:
        return parse_peers(value)
    except ValueError as exc:
        fail_usage([f"--peers: {exc}"])
        return ()
