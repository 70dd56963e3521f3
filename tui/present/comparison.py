"""Two runs compared for the terminal and the History pane: the runs, what differs, then a line and
a table a pass (each plan's kernel time in A and B, then each output's error)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from .format import sci, us
from .tables import FIGURE, NAME, FitTable

CHANGE_STYLE_PCT = 5.0  # a change of kernel time past this is coloured (slower red, faster green)


def environment_words(changes) -> str:
    if not changes:
        return "environment: the same GPU, driver, CUDA, torch, cuDNN and frontend"
    return "environment changed: " + ", ".join(f"{d.name} {d.a} → {d.b}" for d in changes)


def _pct(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:+.1f}%"


def _change(pct: float | None) -> Text:
    """A change of kernel time, slower in red and faster in green past CHANGE_STYLE_PCT."""
    style = ""
    if pct is not None and abs(pct) > CHANGE_STYLE_PCT:
        style = "red" if pct > 0 else "green"
    return Text(_pct(pct), style=style)


def comparison_renderables(c, a: str, b: str) -> list[Any]:
    """The comparison for the terminal: the two runs, what differs, then a line and a table a
    pass (each plan's kernel time in A and B, then each output's error)."""
    parts: list[Any] = [
        Text(f"A {a}: {c.a_label} ({c.a_status})\nB {b}: {c.b_label} ({c.b_status})"),
        Text(environment_words(c.environment)),
    ]
    if c.config:
        parts.append(Text("configuration differs: " + ", ".join(f"{d.name} {d.a} → {d.b}" for d in c.config)))
    for p in c.passes:
        regime = p.a_regime if p.a_regime == p.b_regime else f"{p.a_regime or '?'} then {p.b_regime or '?'}"
        timed = (f"the heuristic's pick {us(p.a_us)} → {us(p.b_us)} ({_pct(p.change_pct)}"
                 f"{f', {regime}' if regime else ''})")  # fmt: skip
        no_time = "no kernel time in either"
        parts.append(
            Text(
                f"{p.kind}: {p.a_status} / {p.b_status}; {no_time if p.a_us is None and p.b_us is None else timed}"
            )
        )
        if not (p.plans or p.outputs):
            continue
        table = FitTable(caption="H: the heuristic's pick in that run")
        for col in ("plan", "A", "B", "change", "in A", "in B"):
            # a plan's state and a verdict ("within tolerance") wrap at their spaces; the figures never
            table.add_column(
                col,
                NAME if col in ("plan", "in A", "in B") else FIGURE,
                justify=None if col == "plan" else "right",
            )
        for plan in p.plans:
            table.add_row(Text(plan.name), us(plan.a_us), us(plan.b_us), _change(plan.change_pct),
                          plan.a_state + (" H" if plan.a_pick else ""),
                          plan.b_state + (" H" if plan.b_pick else ""))  # fmt: skip
        for out in p.outputs:
            table.add_row(Text(f"{out.output} max abs error", style="italic"), sci(out.a_max_abs),
                          sci(out.b_max_abs), "", _verdict(out.a_passed), _verdict(out.b_passed))  # fmt: skip
        parts.append(table)
    return parts


def _verdict(passed: bool | None) -> str:
    return "-" if passed is None else "within tolerance" if passed else "MISMATCH"
