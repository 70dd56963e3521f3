"""The headless commands: run one configuration, sanity-check a GPU box, describe it.

Every command goes through the same Engine and RunResult as the dashboard, in the engine's own
process as the dashboard does (a crash in cuDNN costs that process, not the command), so the CLI
and the screen can never disagree. Bad input exits with code 2 and names the option.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click
from rich.markup import escape

from .check import QUICK_REPLAYS, SMOKE, SMOKE_CASES
from .cli_common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    _console,
    _fail_usage,
    _run_options,
    check_export_paths,
    save_exports,
    timing_options,
)
from .cli_history import CheckRecorder, compare, history, history_options, record_run, run_from_history
from .cli_peers import peers_option
from .engine.config import ConfigError, FieldError, SdpaConfig
from .engine.fields import FIELD, FIELDS, SHORTHANDS, Choice, Field, Switch, from_entries
from .engine.results import REGIME_BURST, STATUS_CPU_ONLY

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


def preset_config(name: str) -> SdpaConfig:
    from .presets import find

    if not name.strip():
        _fail_usage(["--preset: empty; name a preset (`sdpa-explorer presets` lists them)"])
    try:
        return find(name).config
    except KeyError as exc:
        _fail_usage([f"--preset: {exc.args[0]}"])
    except ValueError as exc:
        _fail_usage([f"--preset: {exc}"])
    raise AssertionError  # unreachable: _fail_usage exits


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
        _fail_usage(_by_option(exc.errors))
    errors = config.validate()
    if errors:
        _fail_usage(_by_option(errors))
    return config


def _by_option(errors: list[FieldError]) -> list[str]:
    return [f"{FIELD[e.field].option if e.field in FIELD else e.field}: {e.message}" for e in errors]


def engine_session():
    """The engine process the commands run their configurations in."""
    from .engine.session import EngineSession

    return EngineSession()


def preset_regimes() -> dict[str, str]:
    """The regime each preset asks for, by name ('' where it names none)."""
    from .presets import load_all

    return {name: preset.regime for name, preset in load_all()[0].items()}


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cudnn-sdpa-explorer")
@click.option(
    "--open",
    "open_path",
    type=click.Path(dir_okay=False),
    help="open a saved result (run --json, or the dashboard's export) in the dashboard",
)
@click.pass_context
def main(ctx: click.Context, open_path: str | None) -> None:
    """Explore cuDNN scaled-dot-product attention: support, plans, build phases,
    accuracy against an fp32 reference, and kernel time. Without a command: the dashboard."""
    if ctx.invoked_subcommand is None:
        opened = read_result(open_path, "--open") if open_path else None
        dashboard(opened.config if opened else None, opened).run()


def dashboard(config: SdpaConfig | None = None, opened: Any = None) -> Any:
    """The dashboard as `sdpa-explorer` makes it: the fork server is started first, so that torch
    loads in it (never in this process) while Textual and the app import here; the app's own
    `warm()` then finds it running."""
    from .engine import launcher

    launcher.warm()
    from .app import make_app

    return make_app(config, opened=opened)


def read_result(path: str, option: str):
    """A saved RunResult (any schema this version reads); exit 2 naming the file when it is not one."""
    from pathlib import Path

    from .engine.config import ConfigError
    from .engine.results import RunResult

    if path.isdigit() and not Path(path).exists():  # a run's id in the history
        return run_from_history(int(path), option)
    try:
        return RunResult.from_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        _fail_usage([f"{option}: cannot read {path}: {exc.strerror or exc}"])
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        _fail_usage([f"{option}: {path} is not a saved result: {exc}"])
    raise AssertionError  # unreachable: _fail_usage exits


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print it as JSON in this version's schema")
def show(path: str, as_json: bool) -> None:
    """Render a saved result (schema 1.0, 1.1 or 2.x) or a run of the history (its id) as the `run`
    report: results recorded on a GPU box read on a laptop."""
    result = read_result(path, "show")
    if as_json:
        click.echo(result.to_json())
    else:
        from .report import result_renderable

        _console().print(result_renderable(result))


@main.command()
@config_options
@timing_options
@peers_option
@history_options()
@click.option(
    "--autotune/--no-autotune",
    default=True,
    show_default=True,
    help="time every plan, not only the heuristic's",
)
@click.option("--check/--no-check", default=True, show_default=True, help="compare with the fp32 reference")
@click.option("--json", "as_json", is_flag=True, help="print the RunResult as JSON")
@click.option("--save-json", type=click.Path(dir_okay=False), help="also write the RunResult as JSON here")
@click.option(
    "--save-csv",
    type=click.Path(dir_okay=False),
    help="also write the plans table (with the environment) as CSV",
)
@click.option(
    "--save-script",
    type=click.Path(dir_okay=False),
    help="also write a standalone cudnn + torch script that reproduces this configuration",
)
def run(
    replays,
    l2_flush,
    regime,
    seed,
    run_anyway,
    cache,
    peers,
    autotune,
    check,
    as_json,
    save_json,
    save_csv,
    save_script,
    **values,
) -> None:
    """Build, plan, run and check one configuration (default: the seed's GPT-2 shape)."""
    config = config_from_options(values)
    exports = {"json": save_json, "csv": save_csv, "script": save_script}
    check_export_paths(exports)
    if not regime and values.get("preset"):
        regime = preset_regimes().get(values["preset"], "")
    regime = regime or REGIME_BURST
    from .check import follow_up

    options = _run_options(replays, l2_flush, regime, autotune, check, seed, run_anyway, peers, cache)
    with engine_session() as session:
        result = session.run(config, options)
    if as_json:
        click.echo(result.to_json())
    else:
        from .report import result_renderable

        _console().print(result_renderable(result))
    save_exports(result, seed, exports)
    record_run(result, values)
    follow_up(result, seed, _console(stderr=True))
    if result.status == "invalid":
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK if result.ok else EXIT_FAIL)


def check_cases(preset_names: tuple[str, ...]) -> list[tuple[str, SdpaConfig]]:
    """The smoke set and every built-in preset; or only the presets named."""
    from .check import builtin_cases

    if preset_names:
        return [(name, preset_config(name)) for name in preset_names]
    problems: list[str] = []
    cases = builtin_cases(problems)
    for p in problems:
        _console(stderr=True).print(f"[yellow]preset skipped:[/yellow] {escape(p)}", soft_wrap=True)
    return cases


@main.command()
@timing_options
@click.option("--preset", "preset_names", multiple=True, help="check only this preset (repeatable)")
@click.option(
    "--quick",
    is_flag=True,
    help=f"the smoke set only, timed over {QUICK_REPLAYS} replays: a box's check in seconds",
)
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@click.option(
    "--gpus", metavar="all|LIST", help="check these GPUs at once (all, or 0,1), flagging stragglers"
)
@history_options(baselines=True)
def check(
    replays, l2_flush, regime, seed, run_anyway, cache, preset_names, quick, as_json, gpus, **keep
) -> None:
    """Sanity-check this GPU box: the smoke set and every built-in preset, one engine process for
    all (restarted after a crash); exit non-zero on any mismatch, failure or unavailable GPU.
    Without a GPU, cuDNN's own validate() still judges every case."""
    from .check import plan_cache_counts, run_cases

    if quick and preset_names:
        _fail_usage(["--quick checks the smoke set only: leave out --preset"])
    cases = [(SMOKE, c) for c in SMOKE_CASES] if quick else check_cases(preset_names)
    replays = min(replays, QUICK_REPLAYS) if quick else replays
    recorder = CheckRecorder(keep, gpus)  # the history, and the baseline: read (or refused) now
    regimes = preset_regimes()  # read once, not once a case

    def options_for(name: str, env):
        case_regime = regime or regimes.get(name, "") or REGIME_BURST
        return _run_options(
            replays, l2_flush, case_regime, False, env.gpu_available, seed, run_anyway, (), cache
        )

    if gpus:
        from .fleet import check_gpus

        sys.exit(check_gpus(gpus, cases, options_for, as_json, seed, recorder.add))
    with engine_session() as session:
        env = session.ready()
        if env is None:
            _fail_run([f"the engine process cannot start: {session.down}"], as_json)
        rows, passed = run_cases(
            session, cases, lambda name: options_for(name, env), _console(), as_json, seed, recorder.add
        )
        restarts = (session.restarts, session.restart_reasons)
    failed = len(cases) - passed
    from .fleet import identity_of

    summary = {
        "gpu": identity_of(env),
        "gpu_available": env.gpu_available,
        "passed": passed,
        "failed": failed,
        "restarts": restarts[0],
        "plan_cache": plan_cache_counts(result for _name, result in recorder.cases),
        **recorder.finish(as_json),
    }
    if not env.gpu_available:
        summary["reason"] = env.unavailable_reason
    if as_json:
        click.echo(json.dumps({**summary, "restart_reasons": restarts[1], "cases": rows}, indent=2))
    elif not env.gpu_available:
        valid = sum(r["status"] == STATUS_CPU_ONLY for r in rows)
        _console().print(
            f"[red]FAIL[/red] no usable GPU: {escape(env.unavailable_reason)}; cuDNN's validate() "
            f"accepted {valid} of {len(cases)} cases",
            soft_wrap=True,
        )
    else:
        again = f"; the engine process was restarted {restarts[0]} time(s)" if restarts[0] else ""
        cache = summary["plan_cache"]
        cached = f"; graphs: {cache['loaded']} loaded from the plan cache, {cache['built']} built"
        _console().print(f"{passed} passed, {failed} failed{again}{cached}")
    sys.exit(EXIT_OK if failed == 0 and env.gpu_available and recorder.passed else EXIT_FAIL)


def _fail_run(messages: list[str], as_json: bool) -> None:
    """Nothing could be run at all: say why and exit 1."""
    if as_json:
        click.echo(json.dumps({"gpu_available": False, "reason": "; ".join(messages), "cases": []}, indent=2))
    else:
        for m in messages:
            _console().print(f"[red]FAIL[/red] {escape(m)}")
    sys.exit(EXIT_FAIL)


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
@click.pass_context
def presets(ctx: click.Context, as_json: bool) -> None:
    """List the presets (built-in and yours), and any preset file that does not load."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table
    from rich.text import Text

    from .presets import listing, load_all, user_dir

    found, problems = load_all()
    if as_json:
        click.echo(json.dumps(listing(found, problems), indent=2))
        return
    table = Table(title=Text(f"Presets (yours are in {user_dir()})"), title_justify="left")
    for col in ("name", "from", "configuration", "description"):
        table.add_column(col)
    for p in sorted(found.values(), key=lambda p: (p.origin != "builtin", p.name)):
        origin = p.origin + (" (hides the built-in)" if p.shadows_builtin else "")
        table.add_row(Text(p.name), origin, p.config.label(), Text(p.description))  # text, not markup
    console = _console()
    console.print(table)
    for p in problems:
        console.print(Text.assemble(("not loaded:", "red"), f" {p}"), soft_wrap=True)


@presets.command("save")
@click.argument("name")
@config_options
@click.option("--description", default="", help="what this preset stands for")
@click.option("--force", is_flag=True, help="overwrite a user preset of the same name")
def presets_save(name, description, force, **values) -> None:
    """Save the configuration given by the options as your preset NAME."""
    from .presets import PresetExists, save_user

    config = config_from_options(values)
    try:
        path = save_user(name, config, description, overwrite=force)
    except PresetExists as exc:
        _fail_usage([f"{exc}; add --force to overwrite it"])
    except ValueError as exc:
        _fail_usage([str(exc)])
    except OSError as exc:
        _console(stderr=True).print(
            f"[red]error:[/red] cannot save preset {escape(repr(name))}: {escape(str(exc))}"
        )
        sys.exit(EXIT_FAIL)
    _console().print(f"saved {config.label()} as {escape(str(path))}", soft_wrap=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
def env(as_json) -> None:
    """Describe the GPU, driver, CUDA, torch, cuDNN and frontend this tool sees."""
    from .engine.environment import collect
    from .report import environment_table

    info = collect()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(info), indent=2))
    else:
        _console().print(environment_table(info))


if __name__ == "__main__":  # run as a file: the package's own module is the one with every command
    from tui.cli import main as package_main

    package_main()
else:
    from .cli_cache import cache as cache_command
    from .cli_explain import explain
    from .cli_search import search
    from .cli_server import server
    from .sweep_cli import merge, sweep

    for command in (sweep, merge, explain, history, compare, cache_command, search, server):
        main.add_command(command)
