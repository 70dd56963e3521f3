"""The --peers option of the commands that measure (run, sweep): other ways to compute the same
attention, timed and checked beside cuDNN (engine/peers.py)."""

from __future__ import annotations

import click

from .engine.peers import PEER_KEYS, parse_peers

HELP = f"also time and check these peers on the same tensors: all, or a list of {', '.join(PEER_KEYS)}"


def _parse(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    if not value:
        return ()
    try:
        return parse_peers(value)
    except ValueError as exc:
        from .cli import _fail_usage

        _fail_usage([f"--peers: {exc}"])
        return ()


def peers_option(fn):
    return click.option("--peers", default="", metavar="LIST", callback=_parse, help=HELP)(fn)
