"""`sdpa-explorer run`: build, plan, run and check one configuration, in the engine process as the
dashboard does (a crash in cuDNN costs that process, not the command); bad input exits 2 naming
the option."""

from __future__ import annotations

import sys

import click

from . import common
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, check_export_paths, save_exports, terminal
from .history import history_options, record_run
from .options import (
    config_from_options,
    config_options,
    measure_options,
    peers_option,
    regime_of,
    run_options,
    timing_options,
)


@click.command()
@config_options
@timing_options
@peers_option
@history_options()
@measure_options
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
def run(as_json, save_json, save_csv, save_script, **values) -> None:
    """Build, plan, run and check one configuration (default: the seed's GPT-2 shape)."""
    config = config_from_options(values)
    exports = {"json": save_json, "csv": save_csv, "script": save_script}
    check_export_paths(exports)
    from ..jobs.check import follow_up

    options = run_options(values, regime=regime_of(values))
    with common.engine_session() as session:
        result = session.run(config, options)
    if as_json:
        click.echo(result.to_json())
    else:
        from ..present.report import result_renderable

        terminal().print(result_renderable(result))
    record_run(result, values)  # kept before any export: a failed export loses no run
    exported = save_exports(result, options.seed, exports)
    follow_up(result, options.seed, terminal(stderr=True))
    if result.status == "invalid":
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK if result.ok and exported else EXIT_FAIL)
