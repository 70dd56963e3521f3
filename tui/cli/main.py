"""The headless commands: run one configuration, sanity-check a GPU box, describe it.

Every command goes through the same Engine and RunResult as the dashboard, in the engine's own
process as the dashboard does (a crash in cuDNN costs that process, not the command), so the CLI
and the screen can never disagree. Bad input exits with code 2 and names the option. This module
is the group; each command lives in a module of its own.
"""

from __future__ import annotations

import gc
from typing import Any

import click

from ..model.config import SdpaConfig
from . import common
from .cache import cache
from .check import check
from .env import env
from .explain import explain
from .history import compare, history
from .presets import presets
from .run import run
from .search import search
from .server import server
from .show import show
from .sweep import merge, sweep


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
    if ctx.invoked_subcommand is not None:
        gc.enable()  # held off while the tool imported (tui/entry.py); the dashboard's first frame turns it on
    else:
        opened = common.read_result(open_path, "--open") if open_path else None
        dashboard(opened.config if opened else None, opened).run()


def dashboard(config: SdpaConfig | None = None, opened: Any = None) -> Any:
    """The dashboard as `sdpa-explorer` makes it: the fork server is started first, so that torch
    loads in it (never in this process) while Textual and the app import here; the app's own
    `warm()` then finds it running."""
    from ..process import launcher

    launcher.warm()
    from ..app import make_app

    return make_app(config, opened=opened)


for command in (
    show,
    run,
    check,
    presets,
    env,
    sweep,
    merge,
    explain,
    history,
    compare,
    cache,
    search,
    server,
):
    main.add_command(command)
