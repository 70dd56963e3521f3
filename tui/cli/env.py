"""`sdpa-explorer env`: the GPU, driver, CUDA, torch, cuDNN and frontend this tool sees.

It is what the engine process says it sees when it is ready, as the dashboard's Environment pane
shows it: that process imports torch and cudnn (forked from a warm engine server, it is ready in
a fraction of a second), and this one never does.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from . import common
from .common import EXIT_FAIL, terminal


@click.command()
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
def env(as_json) -> None:
    """Describe the GPU, driver, CUDA, torch, cuDNN and frontend this tool sees."""
    from ..present.report import environment_table

    with common.engine_session() as session:
        info = session.ready()
        down = session.down
    if info is None:
        common.say_error(f"the engine process cannot start: {down}")
        sys.exit(EXIT_FAIL)
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(info), indent=2))
    else:
        terminal().print(environment_table(info))
