"""The knob search's report in words, shared by `sdpa-explorer search` (cli/search.py) and the
Search pane (app/widgets/search.py): the space searched of each engine, the candidate counts, the
heuristic's pick against the best found and the fastest peer, the faster candidates that fail the
check, the pin hint. Each side lays these pieces out its own way (lines of text, a grid of rows);
where the two word a piece differently, both wordings live here, beside each other."""

from __future__ import annotations

from ..model.knob_search import EngineSpace, KnobAxis, Trial
from ..model.search_results import SearchResult
from .format import us

__all__ = [
    "BEST_NAME",
    "COUNTS_NAME",
    "FINDING_NAME",
    "PEER_NAME",
    "PICK_NAME",
    "PIN_NAME",
    "SKIPPED_NAME",
    "WENT_ON",
    "WRONG_SHOWN",
    "counts_words",
    "fresh_faster",
    "gain_won",
    "gain_words",
    "peer_figure",
    "pin_hint",
    "space_words",
    "time_words",
    "wrong_lines",
    "wrong_words",
]

# what each piece is called: a line's lead in the CLI, a row's label in the pane
PICK_NAME, BEST_NAME, PEER_NAME = "heuristic's pick", "best found", "fastest peer"
COUNTS_NAME, SKIPPED_NAME, FINDING_NAME, PIN_NAME = "candidates", "not searched", "finding", "pin it"
WENT_ON = "the search went on without it"  # after a candidate that crashed an engine process
WRONG_SHOWN = 3  # the faster-but-wrong candidates a report names, fastest first


def _axis_words(a: KnobAxis) -> str:
    """A knob and the range searched of it: 'SPLIT_KV 1..8 step 2' (the step only where not 1)."""
    return f"{a.name} {a.lo}..{a.hi}" + (f" step {a.stride}" if a.stride > 1 else "")


def space_words(s: EngineSpace, source: bool = False) -> str:
    """The space searched of an engine, its size and how it was searched; `source` adds where
    the space came from (the CLI says it, the pane has no room)."""
    how = "tried whole" if s.exhaustive else "drawn and refined"
    came = f"; {s.source}" if source else ""
    axes = ", ".join(_axis_words(a) for a in s.axes) or "no knobs"
    return f"engine {s.engine_id}: {axes} ({s.size} settings, {how}{came})"


def counts_words(r: SearchResult, crashed: bool = False) -> str:
    """The candidates searched: tried, built, failed to build, failed the check; `crashed` adds
    those that crashed an engine process, where there were some (the pane's row says it)."""
    c = r.counts()
    words = (f"{c['tried']} tried, {c['built']} built, {c['build failed']} failed to build, "
             f"{c['check failed']} failed the check")  # fmt: skip
    return words + (f", {c['crashed']} crashed" if crashed and c.get("crashed") else "")


def time_words(t: Trial | None) -> str:
    """A trial's kernel time, '-' where there is no trial (the pick did not build)."""
    return us(t.time_us) if t is not None else "-"


def gain_words(r: SearchResult) -> str:
    """The best found against the pick: 'the pick itself', '+11.3% against the pick', or ''."""
    best, gain = r.best, r.gain_pct
    if best is None:
        return ""
    if best.plan == r.pick_plan:
        return "the pick itself"
    return f"{gain:+.1f}% against the pick" if gain is not None else ""


def gain_won(r: SearchResult) -> bool:
    """Whether a plan other than the pick was found faster: what turns the gain green."""
    best = r.best
    return best is not None and best.plan != r.pick_plan and (r.gain_pct or 0) > 0


def fresh_faster(r: SearchResult) -> bool:
    """Whether the contender, pinned in a fresh engine process, ran faster than the pick there."""
    return r.fresh is not None and (r.fresh.gain_pct or 0) > 0


def peer_figure(r: SearchResult) -> tuple[str, str] | None:
    """The fastest peer timed beside and its kernel time; None where no peer was timed."""
    peer = r.best_peer
    if peer is None or peer.timing is None:
        return None
    return peer.name, us(peer.timing.median_us)


def wrong_lines(r: SearchResult) -> list[str]:
    """The CLI's finding, a line a candidate: faster than the best right one, but wrong."""
    return [
        f"{t.plan} runs in {us(t.time_us)} but fails the check (max abs error {t.max_abs_error:.3g})"
        for t in r.faster_but_wrong()[:WRONG_SHOWN]
    ]


def wrong_words(r: SearchResult) -> str:
    """The pane's finding in one row: the faster wrong candidates and their kernel times; ''
    where there are none."""
    wrong = r.faster_but_wrong()
    if not wrong:
        return ""
    named = ", ".join(f"{t.plan} {us(t.time_us)}" for t in wrong[:WRONG_SHOWN])
    return named + (" ..." if len(wrong) > WRONG_SHOWN else "") + ": faster, but fail the check"


def pin_hint(r: SearchResult, keys: bool = False) -> tuple[str, str]:
    """The pin hint: how to pin the plan worth pinning and how it is kept, said with the CLI's
    flags or (`keys`) the pane's keys; ('', '') where the pick is as fast as anything found."""
    if r.to_pin is None:
        return "", ""
    plan = r.to_pin.plan
    if keys:
        return f"p or Pin best: {plan} into the form's pinned plan", "Ctrl+S keeps it"
    return f'--plan "{plan}"', "run, or a preset's plan key; --save-preset NAME keeps it"
