"""Explain's grid and refusals as the CLI prints them and the Explain pane shows them: a cell is
a map, not the reason (who refused and the refusal's number), the refusals listed once below."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from ..engine.explain import Cell, Explanation, Refusal

# who refused, as a cell names it (the refusal's own words follow the grid)
SOURCE_SHORT = {
    "tool": "rules",
    "frontend validate()": "validate",
    "cuDNN backend": "backend",
    "open-source engine": "open-source",
}
SOURCE_STYLE = {"tool": "magenta", "frontend validate()": "yellow", "cuDNN backend": "red"}


def numbered(e: Explanation) -> dict[Refusal, int]:
    """Each refusal's number, as the grid names it and the list says it."""
    return {r: n for n, (r, _cells) in enumerate(e.refusals(), 1)}


def cell_text(cell: Cell, numbers: dict[Refusal, int], short: bool = False) -> Text:
    """A grid cell: the plans cuDNN offers, validate()'s pass, or who refused (#n in the list).
    `short`, for a narrow pane: the counts and numbers only (the list below names who refused;
    validate()'s pass is its mark alone, as narrow as the mode names A and B)."""
    from ..engine.explain import SOURCE_TOOL, SUPPORTED, VALID

    if cell.status == SUPPORTED:
        backward = (
            f" +{len(cell.backward_plan_names)}{'' if short else ' bwd'}" if cell.backward_plan_names else ""
        )
        return Text(f"✓ {len(cell.plan_names)}{'' if short else ' plans'}{backward}", style="green")
    if cell.status == VALID:
        return Text("✓" if short else "✓ validate()", style="green dim")
    # cuDNN's words first; the tool's rules are in every cell, so they are counted only alone
    theirs = [r for r in cell.refusals if r.source != SOURCE_TOOL] or list(cell.refusals)
    first = theirs[0]
    text = Text("✗ ", style="red")
    if not short:
        text.append(
            SOURCE_SHORT.get(first.source, first.source), style=SOURCE_STYLE.get(first.source, "cyan")
        )
        text.append(" ")
    text.append(f"#{numbers[first]}")
    return text.append(f" +{len(theirs) - 1}" if len(theirs) > 1 else "", style="dim")


def refusal_lines(e: Explanation) -> Text:
    """Every refusal once, numbered as the grid names them, with the cells it refused."""
    out = Text("Refusals\n", style="bold")
    if not e.refusals():
        return out.append("none: every cell passed what was asked\n", style="green")
    everywhere = len(e.cells)
    for n, (r, cells) in enumerate(e.refusals(), 1):
        at = (
            "every cell"
            if len(cells) == everywhere
            else ", ".join(f"{c.implementation}/{c.heuristic_mode}" for c in cells)
        )
        out.append(f"#{n} ").append(f"[{r.source}]", style=SOURCE_STYLE.get(r.source, "cyan"))
        field = f", field {r.field}" if r.field else ""
        out.append(f" {r.graph} graph at {r.step}{field} ({at}):\n    {r.message}\n")
    return out
