"""Known issues as data: the form a recorded issue takes in the file this machine keeps
(store/known_issues.py; `hunt --record` appends to it), read back into a known_issues.KnownIssue.

A record is a JSON object:

  key          a short name, unique in the file ("gqa-decode-stats-hopper-cudnn-9.19")
  summary      what goes wrong, in one sentence
  outcome      "wrong result", "crash" or "refused"
  seen         the cuDNN versions it was seen on ("9.19.0", ...): it matches from the first
  fixed_in     the release that fixed it, where known: matched below it, not at or above
  archs        compute capability majors it was seen on (9: Hopper); [] for any
  when         the configurations it covers: field -> condition, every one met (pattern_matches)
  established  how it was found (a finding's bundle, a run)

A condition is a value (the field equals it, as a result's JSON writes it: lists for tuples), or
an object of {"in": [values]}, {"not": value}, {"min": n}, {"max": n}, {"mod": [m, r]} (the value
is r modulo m). Besides the configuration's fields, `when` may name what is derived from them:
DERIVED below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .config import SdpaConfig
from .fields import FIELD, Choice
from .inputs import recipe_of
from .known_issues import OUTCOMES, UNFIXED, WRONG_RESULT, KnownIssue, parse_version

FIELDS = tuple(SdpaConfig.__dataclass_fields__)
DERIVED: dict[str, Callable[[SdpaConfig], Any]] = {
    "gqa": lambda c: c.h_q != c.h_kv,  # query heads share key/value heads
    "group": lambda c: c.h_q // c.h_kv if c.h_kv else 0,  # query heads per key/value head
    "padded": lambda c: c.padded,
    "varlen": lambda c: c.varlen,
    "paged": lambda c: c.paged,
    "packed": lambda c: c.packed,
    "fp8": lambda c: c.fp8,
    "pad": lambda c: recipe_of(c).pad,  # the input recipe's fill (None without one)
    "input_scale": lambda c: recipe_of(c).scale,
    "input_shift": lambda c: recipe_of(c).shift,
}
CONDITIONS = ("in", "not", "min", "max", "mod")


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def holds(value: Any, condition: Any) -> bool:
    """Whether a configuration's value meets one condition of a pattern."""
    value = _plain(value)
    if not isinstance(condition, dict):
        return value == condition
    for kind, arg in condition.items():
        if kind == "in" and value not in arg:
            return False
        if kind == "not" and value == arg:
            return False
        if kind in ("min", "max", "mod") and not _number(value):
            return False
        if (kind == "min" and value < arg) or (kind == "max" and value > arg):
            return False
        if kind == "mod" and value % arg[0] != arg[1]:
            return False
    return True


def value_of(config: SdpaConfig, name: str) -> Any:
    return DERIVED[name](config) if name in DERIVED else getattr(config, name)


def pattern_matches(when: Mapping[str, Any], config: SdpaConfig) -> bool:
    """Whether `config` meets every condition of `when`."""
    return all(holds(value_of(config, name), condition) for name, condition in when.items())


def _condition_problem(name: str, condition: Any) -> str | None:
    if not isinstance(condition, dict):
        return None
    unknown = [k for k in condition if k not in CONDITIONS]
    if unknown or not condition:
        return f"when.{name}: a condition is a value or an object of {', '.join(CONDITIONS)}"
    if "in" in condition and not isinstance(condition["in"], list):
        return f"when.{name}: 'in' takes a list"
    if any(k in condition and not _number(condition[k]) for k in ("min", "max")):
        return f"when.{name}: 'min' and 'max' take numbers"
    mod = condition.get("mod", [1, 0])
    if not (isinstance(mod, list) and len(mod) == 2 and all(isinstance(x, int) for x in mod) and mod[0] > 0):
        return f"when.{name}: 'mod' takes [m, r], whole numbers with m > 0"
    return None


def _text_problem(record: dict) -> str | None:
    for name in ("key", "summary", "established"):
        if not isinstance(record.get(name), str) or not record[name].strip():
            return f"{name} must be text"
    return None


def _outcome_problem(record: dict) -> str | None:
    if record.get("outcome") not in OUTCOMES:
        return f"outcome must be one of {', '.join(OUTCOMES)} (got {record.get('outcome')!r})"
    return None


def _seen_problem(record: dict) -> str | None:
    seen = record.get("seen")
    if isinstance(seen, list) and seen and all(isinstance(v, str) and parse_version(v) for v in seen):
        return None
    return "seen must list the cuDNN versions it was seen on, such as 9.19.0"


def _fixed_problem(record: dict) -> str | None:
    fixed = record.get("fixed_in", "")
    if not isinstance(fixed, str) or (fixed and parse_version(fixed) is None):
        return f"fixed_in must be a cuDNN version such as 9.20.0 (got {fixed!r})"
    return None


def _archs_problem(record: dict) -> str | None:
    archs = record.get("archs", [])
    if not isinstance(archs, list) or not all(isinstance(a, int) and not isinstance(a, bool) for a in archs):
        return "archs must list compute capability majors, such as [9]"
    return None


def _when_problem(record: dict) -> str | None:
    when = record.get("when")
    if not isinstance(when, dict) or not when:
        return "when must name at least one field and its condition"
    unknown = [name for name in when if name not in FIELDS and name not in DERIVED]
    if unknown:
        return f"when names {unknown[0]!r}, which is no configuration field (nor {', '.join(DERIVED)})"
    return next((p for name, c in when.items() if (p := _condition_problem(name, c))), None)


# each field's rule, in the order a record's problem is said
RECORD_RULES = (_text_problem, _outcome_problem, _seen_problem, _fixed_problem, _archs_problem, _when_problem)


def problem(record: Any) -> str | None:
    """What is wrong with a record, naming its field (None: it reads)."""
    if not isinstance(record, dict):
        return "a known issue is an object"
    return next((p for rule in RECORD_RULES if (p := rule(record))), None)


def issue_of(record: dict) -> KnownIssue:
    """A record as a KnownIssue; ValueError (naming the field) where it is not one."""
    if (why := problem(record)) is not None:
        raise ValueError(why)
    when = dict(record["when"])
    first = min(parse_version(v) for v in record["seen"])  # type: ignore[type-var]
    return KnownIssue(
        key=record["key"],
        summary=record["summary"],
        cudnn=(first, UNFIXED),  # type: ignore[arg-type]
        archs=tuple(record.get("archs", ())),
        applies=lambda c: pattern_matches(when, c),
        outcome=record["outcome"],
        established=record["established"],
        lifted=record.get("fixed_in", ""),
        seen=tuple(record["seen"]),
    )


def wrong_result_record(
    key: str,
    summary: str,
    when: Mapping[str, Any],
    cudnn_version: str,
    established: str,
    archs: tuple[int, ...] = (),
    fixed_in: str = "",
) -> dict[str, Any]:
    """A finding as the record `store.known_issues.record` appends: a wrong result seen on this
    cuDNN (and these architectures), for the configurations `when` covers."""
    record = {
        "key": key,
        "summary": summary,
        "outcome": WRONG_RESULT,
        "seen": [cudnn_version],
        "archs": list(archs),
        "when": {name: _plain(value) for name, value in when.items()},
        "established": established,
    }
    return {**record, "fixed_in": fixed_in} if fixed_in else record


def pattern_of(config: SdpaConfig, signature: Mapping[str, str]) -> dict[str, Any]:
    """The class a shrunk finding stands for, as `when`: each field of its signature (the options
    and sizes without which it passes, as typed) past where it passes, as the hunt places a draw in
    a class: a size at least the minimal one, a choice at or past it in its declared order,
    any other option on (not its default); where a head count is in it and the minimal
    configuration groups query heads, at least as many query heads to a key/value head."""
    when: dict[str, Any] = {}
    for name, text in signature.items():
        f = FIELD[name]
        value = f.parse(text, config) if isinstance(text, str) else text
        if f.group == "shape" and _number(value):
            when[name] = {"min": value}
        elif isinstance(f, Choice) and value in f.choices:
            when[name] = {"in": list(f.choices[f.choices.index(value) :])}
        else:  # an option on; one at its default stays as it is
            when[name] = _plain(value) if value == f.default else {"not": _plain(f.default)}
    if {"h_q", "h_kv"} & set(signature) and config.h_q != config.h_kv:  # the heads' sharing, not their count
        when["group"] = {"min": config.h_q // config.h_kv}
    return when
