"""The fastest way to run a pass (model/fastest.py) in words: the headline's line, the change an
equivalent form asks for, the findings (a faster kernel whose output failed its check), and the
short cell a table of points or cases shows. One module, so the CLI's report, the headline, the
Peers pane, `check` and the sweep say the same."""

from __future__ import annotations

from ..model.fastest import FORM, PICK, Contender, FastestWay, contenders, fastest_way
from ..model.results import PassResult
from .format import multiple, us

ROLE_WORDS = {PICK: "cuDNN's pick", "fastest plan": "cuDNN's fastest plan", "pinned plan": "the pinned plan"}


def who(c: Contender) -> str:
    """A contender as a sentence names it: "cuDNN's fastest plan", "cuDNN's equivalent form" (the
    change is the next line's), "FA4"."""
    if c.role == FORM:
        return "cuDNN's equivalent form"
    return ROLE_WORDS.get(c.role, c.name)


def margin_words(way: FastestWay) -> str:
    """'1.11x cuDNN's pick' (its speed over the pick's), or where the pick wins, of how many; where
    cuDNN declined the pass, of how many peers."""
    if way.declined:
        return f"of {len(way.contenders)} peers, cuDNN declined"
    if way.is_pick:
        return f"the fastest of {len(way.contenders)} ways timed"
    return f"{multiple(way.margin)} cuDNN's pick"


def fastest_line(way: FastestWay) -> str:
    """'fastest way: FA4 426.70 µs, 1.11x cuDNN's pick (pass)': at most 80 columns with the pass's
    name before it, for any name this tool gives."""
    w = way.winner
    return f"fastest way: {who(w)} {us(w.kernel_us)}, {margin_words(way)} ({w.verdict})"


def change_line(way: FastestWay) -> str:
    """What to change where an equivalent form wins: 'set causal none (the same scores): 1.25x'."""
    if way.winner.role != FORM:
        return ""
    return f"set {way.winner.detail} (the same scores): {multiple(way.margin)} cuDNN's pick"


def finding_lines(way: FastestWay) -> list[str]:
    """Each faster kernel whose output failed its check: a finding, never the winner."""
    return [
        f"finding: {who(c)} {us(c.kernel_us)} is faster but FAILS its check"
        + (f" (max abs {c.max_abs:.2e})" if c.max_abs is not None else "")
        for c in way.findings
    ]


def fastest_lines(p: PassResult) -> list[tuple[str, str]]:
    """The headline's lines for a pass, each with its style; [] where there is no contest."""
    way = fastest_way(p)
    if way is None:
        return []
    lines = [(fastest_line(way), "bold" if way.is_pick or way.declined else "bold green")]
    if change_line(way):
        lines.append((change_line(way), "bold green"))
    return lines + [(words, "bold yellow") for words in finding_lines(way)]


def fastest_cell(p: PassResult | None) -> str:
    """A table's cell: 'FA4 1.11x', 'cuDNN H', '-' where there is no contest."""
    return record_cell(fastest_record(p) if p is not None else None)


FASTEST_COLUMNS = ("name", "role", "kernel_us", "margin", "passed", "change", "findings")


def fastest_record(p: PassResult) -> dict | None:
    """The fastest way as a sweep's row and `check --json` carry it (None: no contest): the
    winner's name and role, kernel time, margin over cuDNN's pick, verdict, the change an
    equivalent form asks for, and the faster contenders that failed their check."""
    way = fastest_way(p)
    if way is None:
        return None
    w = way.winner
    change = w.detail if w.role == FORM else ""
    margin = None if way.margin is None else round(way.margin, 4)
    figures = (w.name, w.role, w.kernel_us, margin, w.passed, change,
               [c.name for c in way.findings])  # fmt: skip
    return dict(zip(FASTEST_COLUMNS, figures, strict=True))


def contender_records(p: PassResult) -> list[dict]:
    """Every timed way to run the pass as `check --json` carries it, so a table of cuDNN's plans
    against each peer can be drawn from one run: name, role, kernel time, verdict, what it ran."""
    return [
        {"name": c.name, "role": c.role, "kernel_us": c.kernel_us, "passed": c.passed, "detail": c.detail}
        for c in contenders(p)
    ]


def record_cell(record: dict | None) -> str:
    """A recorded fastest way's cell (a sweep row's): 'FA4 1.11x', 'cuDNN H', '-'."""
    if not record or not record.get("name"):
        return "-"
    margin = record.get("margin")
    if record.get("role") == PICK or not isinstance(margin, int | float):
        return str(record["name"])
    return f"{record['name']} {multiple(margin)}"
