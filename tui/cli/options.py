"""The options of the commands, derived from the declarations: one a configuration field (as
model/fields.py declares it), the timing and run options of the commands that measure, --peers."""

from __future__ import annotations

from typing import Any

import click

from ..engine.peers import PEER_KEYS, parse_peers
from ..model.config import SEED_MAX, ConfigError, FieldError, SdpaConfig
from ..model.fields import FIELD, FIELDS, SHORTHANDS, Choice, Field, Switch, from_entries
from ..model.statuses import REGIMES
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
    fields. Any problem exits 2, each message naming its option."""
    base = preset_config(values["preset"]) if values.get("preset") is not None else None
    given: dict = {}
    for short, names in SHORTHANDS.items():
        if values.get(short) is not None:
            given.update(dict.fromkeys(names, values[short]))
    given.update({f.name: values[f.name] for f in FIELDS if values.get(f.name) is not None})
    try:
        config = from_entries(given, base)
    except ConfigError as exc:
        fail_usage(by_option(exc.errors))
    errors = validate(config)
    if errors:
        fail_usage(by_option(errors))
    return config


def by_option(errors: list[FieldError]) -> list[str]:
    return [f"{FIELD[e.field].option if e.field in FIELD else e.field}: {e.message}" for e in errors]


def preset_regimes() -> dict[str, str]:
    """The regime each preset asks for, by name ('' where it names none)."""
    from ..store.presets import load_all

    return {name: preset.regime for name, preset in load_all()[0].items()}


def timing_options(fn):
    for opt in reversed(
        [
            click.option(
                "--replays", type=int, default=20, show_default=True, help="timed replays of the CUDA graph"
            ),
            click.option(
                "--l2-flush/--no-l2-flush",
                default=False,
                show_default=True,
                help="flush the L2 before each execution (cold-cache kernel time)",
            ),
            click.option(
                "--regime",
                type=click.Choice(REGIMES, case_sensitive=False),
                default=None,
                help="burst: a short run on a rested GPU (published tables); sustained: timed after "
                "2 s of load (a training step). Default: the preset's, else burst",
            ),
            click.option(
                "--seed",
                type=click.IntRange(0, SEED_MAX),
                default=0,
                show_default=True,
                help="random seed of the inputs (0 to 2**63-1)",
            ),
            click.option(
                "--run-anyway",
                is_flag=True,
                help="run a configuration that matches a known issue (it may crash the engine process)",
            ),
            click.option(
                "--cache/--no-cache",
                default=True,
                show_default=True,
                help="load plans built before from the plan cache on disk (`cache` shows it); "
                "--no-cache builds every plan",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def measure_options(fn):
    """--autotune/--no-autotune and --check/--no-check, of the commands that run (run, sweep)."""
    fn = click.option(
        "--check/--no-check", default=True, show_default=True, help="compare with the fp32 reference"
    )(fn)
    return click.option(
        "--autotune/--no-autotune",
        default=True,
        show_default=True,
        help="time every plan, not only the heuristic's",
    )(fn)


def run_options(replays, l2_flush, regime, autotune, check, seed, anyway, peers=(), cache=True):
    from ..model.options import RunOptions, TimingOptions

    if replays < 1:
        fail_usage([f"--replays: must be at least 1 (got {replays})"])
    timing = TimingOptions(replays=replays, l2_flush=l2_flush, regime=regime)
    return RunOptions(
        timing=timing,
        autotune=autotune,
        check=check,
        seed=seed,
        run_anyway=anyway,
        peers=peers,
        plan_cache=cache,
    )


HELP = f"also time and check these peers on the same tensors: all, or a list of {', '.join(PEER_KEYS)}"


def _parse(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    if not value:
        return ()
    try:
        return parse_peers(value)
    except ValueError as exc:
        fail_usage([f"--peers: {exc}"])
        return ()


def peers_option(fn):
    return click.option("--peers", default="", metavar="LIST", callback=_parse, help=HELP)(fn)
