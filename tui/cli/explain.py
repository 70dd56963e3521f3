"""`sdpa-explorer explain`: who refuses a configuration and why, under every implementation and
heuristic mode, and the nearest configurations that work (tui.engine.explain does the asking).

It is asked of the engine process, as the dashboard's Explain pane asks it: a plan build that
crashes in native code costs that process, not the command, and this process never imports torch
(forked from a warm engine server, the answer comes in a fraction of a second).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.text import Text

from ..model.config import ConfigError, FieldError, SdpaConfig
from ..model.fields import FIELDS, from_entries
from ..present.explain import cell_text, numbered, refusal_lines
from ..present.tables import NAME, FitTable
from . import common
from .common import EXIT_FAIL, EXIT_OK, fail_usage, terminal
from .options import base_config, by_option, config_options, entered

if TYPE_CHECKING:  # the engine's explain loads the graph code: only when the command runs
    from ..engine.explain import Explanation


def config_for_explain(values: dict) -> SdpaConfig:
    """The options as `run` reads them, except that only a field's own problems (type, limits,
    choices) are bad input: the rules across fields are findings that explain reports."""
    given, options = entered(values)
    try:
        config = from_entries(given, base_config(values))
    except ConfigError as exc:
        fail_usage(by_option(exc.errors, options))
    own = [FieldError(f.name, m) for f in FIELDS if (m := f.problem(getattr(config, f.name)))]
    if own:
        fail_usage(by_option(own, options))
    return config


def cells_table(e: Explanation) -> FitTable:
    from ..engine.explain import REFUSED, SUPPORTED

    title = Text(f"explain {e.config.label()}: ")
    title.append(e.verdict, style={SUPPORTED: "green", REFUSED: "red"}.get(e.verdict, "yellow"))
    table = FitTable(title=title, caption="rows: implementation; columns: heuristic mode")
    numbers = numbered(e)
    table.add_column("", NAME)
    for mode in e.modes:
        table.add_column(mode, NAME)  # a cell wraps between its words, never inside one
    for impl in e.implementations:
        table.add_row(Text(impl), *(cell_text(e.cell(impl, mode), numbers) for mode in e.modes))
    return table


def versions_text(e: Explanation) -> Text:
    out = Text("Versions that matter\n", style="bold")
    for what, value in e.versions:
        out.append(f"  {what}: {value}\n")
    for r in e.requirements:
        verdict = {True: "met", False: "NOT met", None: "cannot be told here"}[r.met]
        have = f"installed {r.installed}" if r.installed else "nothing to compare on this machine"
        out.append(f"  a refusal names {r.kind} {r.needed} ({have}: {verdict}): {r.message}\n")
    if e.gpu_note:
        out.append(f"  {e.gpu_note}\n", style="yellow")
    return out


def nearest_text(e: Explanation) -> Text:
    from ..engine.explain import NEEDS_GPU, SUPPORTED, VALID

    out = Text("Nearest working configurations\n", style="bold")
    if e.verdict == SUPPORTED:
        return out.append("  the configuration as given is supported: nothing to search\n")
    if e.verdict == VALID:
        return out.append(
            "  cuDNN's validate() accepts it as given; a GPU would tell whether cuDNN plans it\n"
        )
    if not e.nearest:
        return out.append(f"  none found among {e.searched} edits (one or two fields changed)\n")
    for i, n in enumerate(e.nearest, 1):
        edit = ", ".join(f"{name} {was} → {now}" for name, was, now in n.changes)
        how = (
            f"{len(n.plan_names)} plan(s), one built"
            if n.checked == "plans"
            else f"validate() passes; {NEEDS_GPU}"
        )
        out.append(f"  {i}. {edit}  ({how})\n     ")
        out.append(n.command, style="cyan").append("\n")
    return out.append(f"  ({e.searched} edits judged, smallest first)\n", style="dim")


@click.command()
@config_options
@click.option("--json", "as_json", is_flag=True, help="print the explanation as JSON")
def explain(as_json: bool, **values) -> None:
    """Why cuDNN refuses a configuration: every implementation under every heuristic mode, each
    refusal with its source (the tool's rules, the frontend's validate(), the cuDNN backend, the
    open-source engines), the versions that matter, and the nearest configurations that work."""
    from ..process.session import ExplainFailed

    config = config_for_explain(values)
    with (
        common.engine_session() as session,
        terminal(stderr=True).status("asking cuDNN under every implementation and heuristic mode"),
    ):
        try:
            e = session.explain(config)
        except ExplainFailed as exc:
            terminal(stderr=True).print(
                f"[red]FAIL[/red] no explanation of {escape(config.label())}: {escape(str(exc))}"
            )
            sys.exit(EXIT_FAIL)
    if as_json:
        click.echo(json.dumps(e.to_dict(), indent=2))
    else:
        console = terminal()
        console.print(cells_table(e))
        for part in (refusal_lines(e), versions_text(e), nearest_text(e)):
            console.print(part, soft_wrap=True)  # a command stays one line, to copy
    sys.exit(EXIT_OK)
