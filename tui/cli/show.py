"""`sdpa-explorer show`: a saved result or a kept run rendered as `run` reports it."""

from __future__ import annotations

import click

from .common import read_result, terminal


@click.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print it as JSON in this version's schema")
def show(path: str, as_json: bool) -> None:
    """Render a saved result (schema 1.0, 1.1 or 2.x) or a run of the history (its id) as the `run`
    report: results recorded on a GPU box read on a laptop."""
    result = read_result(path, "show")
    if as_json:
        click.echo(result.to_json())
    else:
        from ..present.report import result_renderable

        terminal().print(result_renderable(result))
