"""Score modifiers: attention as models write it beyond the built-in masks, named and parameterised.

A variant is one field's text (`variant` of SdpaConfig), a name and its parameters:

  none                      the scores as they are (the default)
  softcap:CAP               Gemma 2 and Grok-1: each scaled score s becomes CAP * tanh(s / CAP)
  softcap-causal:CAP[,W]    the same, with a top-left causal mask (and a sliding window of W
                            keys) written inside the modifier
  prefix-lm:P               bidirectional over the first P keys, causal after them (top-left)
  document:L1,L2,...        packed documents of these lengths in every sequence: a query attends
                            only the keys of its own document, causally (packed causal-LM training)

cuDNN builds each as its `score_mod` sub-graph; its validation refuses a score_mod beside ALiBi, a
padding mask or diagonal bounds (causal, window), so a variant that needs a causal mask writes it
itself. This module is the variant's arithmetic without torch: its text, which keys each query
keeps (the Mask pane, FLOPs) and its words; the engine's modifiers.py and score_mod.py compute it.
"""

from __future__ import annotations

import bisect
import math
import struct
from dataclasses import dataclass
from functools import lru_cache

VARIANTS = ("none", "softcap", "softcap-causal", "prefix-lm", "document")
FORMS = "none, softcap:CAP, softcap-causal:CAP[,WINDOW], prefix-lm:P, document:L1,L2,..."
MAX_DOCUMENTS = 32  # each document adds four operations to cuDNN's sub-graph
MAX_TOKENS = 1 << 22  # as a sequence length's bound (config.MAX_LENGTH)
CAUSAL_INSIDE = ("softcap-causal", "prefix-lm", "document")  # a causal mask written in the modifier


@dataclass(frozen=True)
class Variant:
    """One score modifier: its name and parameters (each None or () where the name has none)."""

    name: str = "none"
    cap: float | None = None  # softcap, softcap-causal: the tanh cap of the scaled scores
    window: int | None = None  # softcap-causal: each query sees this many keys back (itself included)
    prefix: int | None = None  # prefix-lm: the keys every query sees
    documents: tuple[int, ...] = ()  # document: the lengths of the documents, in order

    @property
    def text(self) -> str:
        """The canonical text, as the field keeps it."""
        if self.name == "none":
            return "none"
        if self.name == "prefix-lm":
            args = [str(self.prefix)]
        elif self.name == "document":
            args = [str(n) for n in self.documents]
        else:
            args = [_number(self.cap), *([str(self.window)] if self.window else [])]
        return f"{self.name}:{','.join(args)}"

    @property
    def cap_fp32(self) -> float:
        """The cap as the fp32 nearest it, which the kernels compute with and cuDNN's graph is given
        (cuDNN 9.19 makes every output non-finite from a scalar that is not exactly an fp32)."""
        return struct.unpack("f", struct.pack("f", self.cap or 0.0))[0]

    @property
    def masks(self) -> bool:
        """Whether it masks scores (a causal mask inside it): every variant but none and softcap."""
        return self.name in CAUSAL_INSIDE

    @property
    def starts(self) -> tuple[int, ...]:
        """Where each document starts (document: 0, L1, L1 + L2, ...)."""
        out, at = [], 0
        for n in self.documents:
            out.append(at)
            at += n
        return tuple(out)

    def span(self, i: int, s_kv: int) -> tuple[int, int]:
        """The keys [first, stop) query `i` keeps (all of them where nothing is masked)."""
        if not self.masks:
            return 0, s_kv
        stop = min(i + 1, s_kv)
        if self.prefix is not None:
            return 0, min(s_kv, max(self.prefix, i + 1))
        if self.documents:
            starts = self.starts
            return min(starts[bisect.bisect_right(starts, i) - 1], stop), stop
        return (max(0, min(i - self.window + 1, stop)) if self.window else 0), stop

    def keys(self, r0: int, r1: int, s_kv: int) -> tuple[int, int]:
        """The keys [first, stop) some query of rows [r0, r1) keeps: each row's span moves right."""
        return self.span(r0, s_kv)[0], self.span(r1 - 1, s_kv)[1]

    def kept_pairs(self, s_q: int, s_kv: int) -> int:
        """The (query, key) scores it keeps of an s_q x s_kv block, in closed form."""
        if not self.masks:
            return s_q * s_kv
        causal = _clamped_sum(s_q, 1, s_kv)  # sum over rows of min(i + 1, s_kv)
        if self.prefix is not None:
            head = min(s_q, self.prefix)
            return head * min(s_kv, self.prefix) + causal - _clamped_sum(head, 1, s_kv)
        if self.documents:
            total = 0
            for a, n in zip(self.starts, self.documents, strict=True):
                end = min(a + n, s_q)
                if a < min(s_q, s_kv):
                    total += _clamped_sum(end, 1, s_kv) - _clamped_sum(a, 1, s_kv) - (end - a) * a
            return total
        return causal - (_clamped_sum(s_q, 1 - self.window, s_kv) if self.window else 0)

    def words(self) -> str:
        """What it does, in a few words."""
        cap = f"tanh softcap {_number(self.cap or 0.0)} of the scaled scores"
        return {
            "none": "no score modifier",
            "softcap": cap,
            "softcap-causal": cap + ", causal" + (f", window {self.window}" if self.window else ""),
            "prefix-lm": f"bidirectional over the first {self.prefix} keys, causal after them",
            "document": f"{len(self.documents)} documents of {','.join(map(str, self.documents))} tokens, "
            "each attending only itself, causally",
        }[self.name]


NONE = Variant()


def _clamped_sum(n: int, off: int, top: int) -> int:
    """sum over i in [0, n) of clamp(i + off, 0, top), in O(1)."""
    if n <= 0:
        return 0
    lo, hi = min(max(0, -off), n), min(max(0, top - off), n)  # rows below 0, rows reaching the top
    partial = (hi - lo) * ((lo + off) + (hi - 1 + off)) // 2 if hi > lo else 0
    return partial + (n - max(hi, lo)) * top


def _number(value: float | None) -> str:
    """The shortest text that reads back the same: 50, not 50.0."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _whole(text: str, what: str, least: int = 1) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{what} must be a whole number (got {text!r})") from None
    if not least <= n <= MAX_TOKENS:
        raise ValueError(f"{what} must lie between {least} and {MAX_TOKENS} (got {n})")
    return n


def _cap(text: str, name: str) -> float:
    try:
        cap = float(text)
    except ValueError:
        raise ValueError(f"{name}'s cap must be a number (got {text!r})") from None
    if not (math.isfinite(cap) and cap > 0):
        raise ValueError(f"{name}'s cap must be a positive finite number (got {text!r})")
    return cap


@lru_cache(maxsize=256)
def parse_variant(text: str) -> Variant:
    """What a person typed -> the Variant; ValueError says, in one line, what to write instead."""
    if not isinstance(text, str):
        raise ValueError(f"a score modifier is text such as softcap:50 (got {text!r})")
    name, _, rest = "".join(text.split()).lower().replace("_", "-").partition(":")
    args = [a for a in rest.split(",")] if rest else []
    if name in ("", "none"):
        if args:
            raise ValueError(f"none takes no parameters (got {text.strip()!r})")
        return NONE
    if name not in VARIANTS:
        raise ValueError(f"unknown score modifier {name!r} (use {FORMS})")
    need = {"softcap": (1, 1), "softcap-causal": (1, 2), "prefix-lm": (1, 1), "document": (1, MAX_DOCUMENTS)}
    least, most = need[name]
    if not least <= len(args) <= most:
        example = {"softcap": "softcap:50", "softcap-causal": "softcap-causal:50 or softcap-causal:50,4096",
                   "prefix-lm": "prefix-lm:256", "document": "document:512,1024,512"}[name]  # fmt: skip
        many = f"takes at most {most} documents" if name == "document" and len(args) > most else "is written"
        raise ValueError(f"{name} {many}{'' if 'most' in many else ' ' + example} (got {text.strip()!r})")
    if name in ("softcap", "softcap-causal"):
        window = _whole(args[1], "softcap-causal's window") if len(args) > 1 else None
        return Variant(name, cap=_cap(args[0], name), window=window)
    if name == "prefix-lm":
        return Variant(name, prefix=_whole(args[0], "prefix-lm's prefix length"))
    return Variant(name, documents=tuple(_whole(a, "a document's length") for a in args))


def canonical_variant(text: str) -> str:
    """The canonical text of what was typed; ValueError as parse_variant."""
    return parse_variant(text).text
