"""`sdpa-explorer server`: the engine server of this install (tui.process.server), and stopping it.

The first launch starts it; it keeps torch imported, never CUDA, and forks every later launch's
engine processes until it has served no one for SDPA_EXPLORER_SERVER_IDLE seconds (600 by
default; 0 never starts one).
"""

from __future__ import annotations

import json
import sys
import time

import click

from .common import EXIT_FAIL, EXIT_OK, terminal


@click.command()
@click.option("--stop", is_flag=True, help="end them (engines they serve run on until they end)")
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
def server(stop: bool, as_json: bool) -> None:
    """Show the engine servers that keep torch imported between launches; --stop ends them."""
    from ..process import server_client

    why = server_client.unavailable()
    try:
        ours = server_client.paths()[0]  # whether or not this launch would use it
    except server_client.ServerUnavailable as exc:
        ours, why = None, why or str(exc)
    servers, refused = server_client.ask_all("status")
    for s in servers:
        s["this_install"] = s["socket"] == ours
    if stop:
        server_client.ask_all("stop")
    if as_json:
        click.echo(
            json.dumps(
                {"socket": ours, "why_none": why, "servers": servers, "refused": refused, "stopped": stop},
                indent=1,
            )
        )
        sys.exit(EXIT_FAIL if refused else EXIT_OK)
    out = terminal()
    if why:
        out.print(f"this launch would start no engine server: {why}", markup=False, soft_wrap=True)
    for line in refused:
        out.print(line, markup=False, soft_wrap=True)
    if not servers and not refused:
        out.print("no engine server runs", markup=False)
    now = time.time()
    for s in servers:
        whose = (
            "this install's"
            if s["this_install"]
            else "another install's (an older version, another environment)"
        )
        out.print(
            f"engine server pid {s['pid']}, {whose}: up {(now - s['started']) / 60:.0f} min, "
            f"{s['served']} engine(s) served, {len(s['engines'])} running; ends after {s['idle_s']:.0f} s "
            f"without one ({max(s['idle_left_s'], 0):.0f} s left)",
            markup=False,
            soft_wrap=True,
        )
    if stop and servers:
        out.print(f"stopping {len(servers)}: each ends once its engines have", markup=False)
    if refused:
        sys.exit(EXIT_FAIL)  # what it was asked to show or stop, it could not all look at
