"""`sdpa-explorer cache`: what the plan cache on disk holds (tui.store.plan_cache), and clearing it.

A plan built once loads in milliseconds from the cache afterwards; `run --no-cache` and
`check --no-cache` build every plan as if it had never been built.
"""

from __future__ import annotations

import json
import time

import click

from ..model.config import format_bytes
from ..present.tables import FIGURE, NAME, WORDS, FitTable
from .common import terminal


@click.command()
@click.option("--clear", is_flag=True, help="remove every cached plan")
@click.option("--json", "as_json", is_flag=True, help="print as JSON")
def cache(clear: bool, as_json: bool) -> None:
    """Show the plan cache: its folder, entries, size and cap; --clear empties it."""
    from ..store.plan_cache import PlanCache

    plans = PlanCache()
    removed = plans.clear() if clear else None
    entries, unreadable = plans.survey()
    summary = {
        "folder": str(plans.folder),
        "entries": len(entries),
        "plans": sum(e["plans"] for e in entries),
        "bytes": sum(e["size"] for e in entries),
        "cap_bytes": plans.cap_bytes,
        "removed": removed,
        "notes": plans.notes,
        "list": entries,
        "unreadable": unreadable,
    }
    if as_json:
        click.echo(json.dumps(summary, indent=1))
        return
    out = terminal()
    for note in plans.notes:
        out.print(note, markup=False, style="yellow")
    if removed is not None:
        out.print(f"removed {removed} cached graph(s)")
    out.print(
        f"plan cache {plans.folder}: {len(entries)} graph(s), {summary['plans']} plan(s), "
        f"{format_bytes(summary['bytes'])} of {format_bytes(plans.cap_bytes)}",
        markup=False,
        soft_wrap=True,
    )
    for bad in unreadable:  # never loaded: a run builds its graph as if it were not there
        out.print(
            f"unreadable: {bad['key']}.json ({bad['why']})", markup=False, style="yellow", soft_wrap=True
        )
    if not entries:
        return
    table = FitTable(key_words="graph")
    for col, kind in (("graph", NAME), ("plans", FIGURE), ("size", FIGURE), ("last used", FIGURE)):
        table.add_column(col, kind, justify="left" if kind == NAME else "right")
    table.add_column("plan names", WORDS, drop=0)  # wraps between names, or leaves for the lines below
    now = time.time()
    for e in entries:
        ago = now - e["last_used"]
        when = (
            f"{ago / 3600:.1f} h ago"
            if ago >= 3600
            else f"{ago / 60:.0f} min ago"
            if ago >= 60
            else "just now"
        )
        names = ", ".join(e["names"][:6]) + (" …" if len(e["names"]) > 6 else "")
        table.add_row(e["key"][:12], str(e["plans"]), format_bytes(e["size"]), when, names)
    out.print(table)
