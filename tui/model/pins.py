"""A plan named by its engine and knobs, as cuDNN replays one: `create_execution_plan(engine_id,
{knob_type: value})`. A preset may pin its forward to such a plan (the `plan` field), a knob
search finds them, and the reproduction script rebuilds one exactly.

The text is the engine id, then each knob as NAME=VALUE: `1 KERNEL_CFG=27`, or `eng1 KERNEL_CFG=27,
SPLIT_KV=2`. The names are cuDNN's `knob_type` members; a name the installed cuDNN does not know
is said when the plan is built, not refused here, so a pin written under a newer cuDNN still reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_KNOB = re.compile(r"^([A-Z][A-Z0-9_]*)=(-?\d+)$")


@dataclass(frozen=True, order=True)
class Pin:
    """One (engine, knobs) pair; knobs sorted by name, so equal plans compare and hash equal."""

    engine_id: int
    knobs: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, engine_id: int, knobs: dict[str, int] | None = None) -> Pin:
        return cls(int(engine_id), tuple(sorted((str(k), int(v)) for k, v in (knobs or {}).items())))

    def text(self) -> str:
        return " ".join([str(self.engine_id), *(f"{k}={v}" for k, v in self.knobs)])

    def knob_dict(self) -> dict[str, int]:
        return dict(self.knobs)

    def knob_types(self, cudnn: Any) -> dict[Any, int]:
        """The knobs as create_execution_plan() takes them; KeyError names a knob cuDNN lacks."""
        out = {}
        for name, value in self.knobs:
            member = getattr(cudnn.knob_type, name, None)
            if member is None:
                raise KeyError(f"this cuDNN has no knob {name}")
            out[member] = value
        return out

    def __str__(self) -> str:
        return self.text()


def parse(text: str) -> Pin:
    """A pin from what a person typed; ValueError says which part is wrong."""
    parts = [p for p in re.split(r"[\s,;]+", text.strip()) if p]
    if not parts:
        raise ValueError("a plan is an engine id, then its knobs as NAME=VALUE (e.g. 1 KERNEL_CFG=27)")
    engine = parts[0].lower().removeprefix("engine").removeprefix("eng")
    if not engine.isdigit():
        raise ValueError(f"a plan starts with its engine id, a whole number (got {parts[0]!r})")
    knobs: dict[str, int] = {}
    for part in parts[1:]:
        m = _KNOB.match(part.upper())
        if m is None:
            raise ValueError(f"a knob is NAME=VALUE, as KERNEL_CFG=27 (got {part!r})")
        if m.group(1) in knobs:
            raise ValueError(f"knob {m.group(1)} is given twice")
        knobs[m.group(1)] = int(m.group(2))
    return Pin.of(int(engine), knobs)


def canonical(text: str) -> str:
    return parse(text).text()


def note(
    pin_text: str, plans: Any, heuristic: int | None, pinned: int | None, error: str, version: str
) -> str:
    """What a run says of its pinned plan: that it no longer exists under the installed cuDNN (and
    the heuristic's pick ran instead), or its kernel time against the heuristic's pick."""
    under = f"under cuDNN {version}" if version else "here"
    if pinned is None:
        return f"pinned plan {pin_text} does not build {under} ({error or 'no reason given'}): the heuristic's pick ran"
    by_index = {p.index: p for p in plans}
    mine, pick = by_index.get(pinned), by_index.get(heuristic)
    if mine is None or mine.timing is None or pick is None or pick.timing is None:
        return f"pinned plan {pin_text} ran (plan {pinned}) {under}"
    if pinned == heuristic:
        return f"pinned plan {pin_text} is the heuristic's pick {under}"
    a, b = mine.timing.median_us, pick.timing.median_us
    change = (b - a) / b * 100 if b else 0.0
    words = f"{change:.1f}% faster than" if change >= 0 else f"{-change:.1f}% slower than"
    return f"pinned plan {pin_text} ran {under}: {a:.2f} µs, {words} the heuristic's pick {pick.name} ({b:.2f} µs)"
