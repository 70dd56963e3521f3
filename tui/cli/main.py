"""The headless commands: run one configuration, sanity-check a GPU box, describe it.

Every command goes through the same Engine and RunResult as the dashboard, in the engine's own
process as the dashboard does (a crash in cuDNN costs that process, not the command), so the CLI
and the screen can never disagree. Bad input exits with code 2 and names the option. This module
is the group; each command lives in a module of its own.
"""

from __future__ import annotations

import gc
import importlib
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..model.config import SdpaConfig

# each command's module (under tui.cli): imported when the command is asked for, so that the
# dashboard (no command) imports none of them (a tenth of its launch went to them)
COMMANDS = {
    "cache": "cache",
    "check": "check",
    "compare": "history",
    "env": "env",
    "explain": "explain",
    "history": "history",
    "hunt": "hunt",
    "merge": "sweep",
    "presets": "presets",
    "run": "run",
    "search": "search",
    "server": "server",
    "show": "show",
    "sweep": "sweep",
}


class Commands(click.Group):
    """The group whose commands are imported when named (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"{__package__}.{COMMANDS[cmd_name]}")
            self.add_command(getattr(module, cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)  # type: ignore[arg-type]


@click.group(
    cls=Commands, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]}
)
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
        opened = None
        if open_path:
            from . import common

            opened = common.read_result(open_path, "--open")
        dashboard(opened.config if opened else None, opened).run()


def dashboard(config: SdpaConfig | None = None, opened: Any = None) -> Any:
    """The dashboard as `sdpa-explorer` makes it: the fork server is started first, so that torch
    loads in it (never in this process) while Textual and the app import here; the app's own
    `warm()` then finds it running."""
    from ..process import launcher

    launcher.warm()
    from ..app import make_app

    return make_app(config, opened=opened)
