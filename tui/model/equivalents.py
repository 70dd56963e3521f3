"""Equivalent forms of a configuration: another setting of its mask fields that keeps exactly the
same scores, which cuDNN may plan (and time) differently. The engine times each form beside the
configuration itself and checks it against the same reference (engine/forms.py); the fastest way
(model/fastest.py) says which field to change when a form is faster.

A form is equivalent when every batch entry keeps the same (query, key) pairs: its band contains
the configuration's (query i keeps key j when i + lo < j <= i + hi, SdpaConfig.band) and keeps as
many pairs, within the same real lengths. So, for instance, a bottom-right causal mask with one
query a sequence (decode: it sees every key) is no mask; bottom-right with s_q = s_kv is top-left;
a window at least as wide as the keys a query can see is no window; padding lengths that are all
full are no padding. A bias is drawn at random (the `bias` field), never zeros, so no form drops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import SdpaConfig
from .validation import validate

# the changes tried, each with why it keeps the scores; a change applies where the field is set
_CANDIDATES: tuple[tuple[str, Any, str], ...] = (
    ("causal", "none", "every query sees every key it can"),
    ("causal", "top_left", "with s_q = s_kv the two corners are one diagonal"),
    ("window", None, "the window is wider than the keys a query sees"),
    ("seq_lens", None, "every length is full"),
)


@dataclass(frozen=True)
class Equivalent:
    """One equivalent form: the fields it changes (name -> new value) and why it is the same."""

    changes: tuple[tuple[str, Any], ...]
    why: str

    def config(self, config: SdpaConfig) -> SdpaConfig:
        """The form's configuration: the changes, and no pinned plan (the pin is the original's)."""
        return config.replace(**dict(self.changes), plan=None)

    def words(self) -> str:
        """What to change, as the fastest-way line says it: 'causal none', 'seq lengths none'."""
        shown: dict[str, str] = {}
        for name, value in self.changes:
            key = "seq lengths" if name.startswith("seq_lens") else name
            shown[key] = "none" if value is None else str(value)
        return ", ".join(f"{k} {v}" for k, v in shown.items())


def same_scores(a: SdpaConfig, b: SdpaConfig) -> bool:
    """Whether `b` keeps exactly the (query, key) pairs `a` keeps, in every batch entry."""
    entries = range(a.b) if (a.padded or b.padded) else range(1)
    for i in entries:
        if a.lengths(i) != b.lengths(i) or a.kept_pairs(i) != b.kept_pairs(i):
            return False
        (lo_a, hi_a), (lo_b, hi_b) = a.band(i), b.band(i)
        wider_lo = lo_b is None or (lo_a is not None and lo_b <= lo_a)
        wider_hi = hi_b is None or (hi_a is not None and hi_b >= hi_a)
        if not (wider_lo and wider_hi):
            return False
    return True


def _change(config: SdpaConfig, name: str, value: Any) -> tuple[tuple[str, Any], ...]:
    """The field changes one candidate makes of `config`; () where it does not apply."""
    if name == "seq_lens":
        given = config.seq_lens_q is not None or config.seq_lens_kv is not None
        if not given or config.varlen or config.paged or config.packed:
            return ()
        return (("seq_lens_q", None), ("seq_lens_kv", None))
    current = getattr(config, name)
    if current == value or (name == "causal" and current == "none"):
        return ()
    return ((name, value),)


def _valid(config: SdpaConfig, form: SdpaConfig) -> bool:
    """Whether `form` keeps the scores of `config` and is a configuration the tool runs."""
    return same_scores(config, form) and not validate(form)


def equivalent_forms(config: SdpaConfig) -> tuple[Equivalent, ...]:
    """The configuration's equivalent forms: each change alone that keeps its scores, then all of
    them together where more than one applies (and together still keep them); () for most."""
    found: list[Equivalent] = []
    for name, value, why in _CANDIDATES:
        changes = _change(config, name, value)
        if changes and _valid(config, config.replace(**dict(changes))):
            if name == "causal" and any(f.changes[0][0] == "causal" for f in found):
                continue  # no mask is found already: top-left would change less
            found.append(Equivalent(changes, why))
    if len(found) > 1:
        together = tuple(c for f in found for c in f.changes)
        if _valid(config, config.replace(**dict(together))):
            found.append(Equivalent(together, "; ".join(f.why for f in found)))
    return tuple(found)
