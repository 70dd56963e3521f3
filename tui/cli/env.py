"""`sdpa-explorer env`: the GPU, driver, CUDA, torch, cuDNN and frontend this tool sees."""

from __future__ import annotations

import dataclasses
import json

import click

from .common import terminal


@click.command()
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
def env(as_json) -> None:
    """Describe the GPU, driver, CUDA, torch, cuDNN and frontend this tool sees."""
    from ..engine.environment import collect
    from ..present.report import environment_table

    info = collect()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(info), indent=2))
    else:
        terminal().print(environment_table(info))
