"""`sdpa-explorer presets`: the presets (built-in and yours) and the files that do not load;
`presets save` keeps the options' configuration as one of yours."""

from __future__ import annotations

import json
import sys

import click
from rich.markup import escape

from .common import EXIT_FAIL, fail_usage, terminal
from .options import config_from_options, config_options


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
@click.pass_context
def presets(ctx: click.Context, as_json: bool) -> None:
    """List the presets (built-in and yours), and any preset file that does not load."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.text import Text

    from ..present.tables import NAME, WORDS, FitTable
    from ..store.presets import listing, load_all, user_dir
    from ..store.reading import printable

    found, problems = load_all()
    if as_json:
        click.echo(json.dumps(listing(found, problems), indent=2))
        return
    table = FitTable(title=Text(f"Presets (yours are in {printable(str(user_dir()))})"), key_words="preset")
    for col in ("name", "from", "configuration", "description"):  # the description leaves first
        table.add_column(
            col, WORDS if col == "description" else NAME, drop=0 if col == "description" else None
        )
    for p in sorted(found.values(), key=lambda p: (p.origin != "builtin", p.name)):
        origin = p.origin + (" (hides the built-in)" if p.shadows_builtin else "")
        table.add_row(Text(p.name), origin, p.config.label(), Text(p.description))  # text, not markup
    console = terminal()
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
    from ..store.presets import PresetExists, save_user

    config = config_from_options(values)
    try:
        path = save_user(name, config, description, overwrite=force)
    except PresetExists as exc:
        fail_usage([f"{exc}; add --force to overwrite it"])
    except ValueError as exc:
        fail_usage([str(exc)])
    except OSError as exc:
        terminal(stderr=True).print(
            f"[red]Error:[/red] cannot save preset {escape(repr(name))}: {escape(str(exc))}"
        )
        sys.exit(EXIT_FAIL)
    terminal().print(f"saved {config.label()} as {escape(str(path))}", soft_wrap=True)
