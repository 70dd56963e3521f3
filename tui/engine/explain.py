"""Why cuDNN refuses a configuration, and the nearest configurations it accepts.

cuDNN's answer to a graph it cannot run is one line ("No execution plans support the graph").
`explain` asks under every implementation and heuristic mode, says who refused (this tool's
rules, the frontend's validate(), the cuDNN backend, the open-source engines) and which version
or architecture a refusal names, and searches small edits for the closest configurations that
work. Without a GPU only validate() answers, and each answer says where a GPU would know more.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig
from ..model.fields import FIELD, FIELDS, Switch, config_from_dict
from ..model.known_issues import parse_version
from ..model.launch import launcher
from ..model.results import Environment
from ..model.validation import modifier_edits, moved_inside, validate
from .graph import GraphBuildError, define_and_validate
from .keywords import UnsupportedOption

SOURCE_TOOL = "tool"  # this product's own rules (validation.py) and keyword guard
SOURCE_VALIDATE = "frontend validate()"  # the frontend's Python checks: they run without a GPU
SOURCE_BACKEND = "cuDNN backend"  # plan creation, support check and plan build
SOURCE_OPENSOURCE = "open-source engine"  # the frontend's Python engines declining the graph
Names = tuple[str, ...]  # plan names, in cuDNN's order
Answer = tuple[Names, list["Refusal"]]  # a graph's plan names and refusals
SUPPORTED, REFUSED, VALID = "supported", "refused", "valid"  # VALID: validate() passed, no GPU to ask further
NEEDS_GPU = "needs a GPU to know more"  # said where validate() passed and only plans could tell

MAX_NEAREST = 5  # configurations listed
MAX_CANDIDATES = 400  # edits judged at most (validate() is cheap: a fraction of a millisecond each)
MAX_PLANNED = 30  # of those, at most this many asked for plans on a GPU (each a plan creation and build)
HEAD_DIM_STEP = 8  # cuDNN's usual head-dim granule; a refusal naming another ("multiple of 16") adds it
SAME_MATH = frozenset({"layout", "implementation", "heuristics"})  # edits that leave the result as it was
ARCHITECTURES = (("Ampere", (8, 0)), ("Ada", (8, 9)), ("Hopper", (9, 0)), ("Blackwell", (10, 0)))

_ARCH_NAMES = "|".join(name for name, _cc in ARCHITECTURES)
_VERSION = r"v?(\d+\.\d+(?:\.\d+)?)"
_MIN_VERSION = re.compile(
    rf"requires?\s+cudnn(?:\s+runtime)?(?:\s+version)?\s*(?:>=\s*)?{_VERSION}"
    rf"|cudnn(?:\s+version)?\s+{_VERSION}(?:\+|\s+(?:or|and)\s+(?:above|later|newer|higher))"
    rf"|cudnn\s+version\s+below\s+{_VERSION}",
    re.IGNORECASE,
)
_ARCH_NEEDED = re.compile(
    rf"(?:only\s+supported\s+on|requires?)\s+(?:the\s+)?(?:sm\d+\+?\s*\(?)?({_ARCH_NAMES})\b"
    rf"|\b({_ARCH_NAMES})\s+(?:gpu\s+)?architecture\s+(?:or|and)\s+newer",
    re.IGNORECASE,
)
_PIECES = re.compile(r";\s+(?=the backend declined: |python engines declined: |python engines that accepted)")


# ---- the records ------------------------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    """One refusal in its author's own words, with who said it and at which step."""

    source: str  # SOURCE_*
    message: str
    step: str = ""  # rules, define, validate, create_execution_plans, check_support, build_plans
    graph: str = "forward"  # the pass whose graph was refused
    field: str = ""  # the tool's rules: the field they name
    needs: tuple[str, ...] = ()  # what the message names as needed: "cuDNN 9.21.0", "Blackwell"


@dataclass(frozen=True)
class Cell:
    """One implementation under one heuristic mode."""

    implementation: str
    heuristic_mode: str
    status: str  # SUPPORTED, REFUSED or VALID
    plan_names: tuple[str, ...] = ()  # the forward's candidate plans
    backward_plan_names: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()


@dataclass(frozen=True)
class Requirement:
    """A minimum a refusal names, against what is installed (met: None when it cannot be told)."""

    kind: str  # "cuDNN" or "architecture"
    needed: str
    installed: str
    met: bool | None
    message: str


@dataclass(frozen=True)
class Nearest:
    """A configuration a small edit away that works, as far as this machine could tell."""

    config: SdpaConfig
    changes: tuple[tuple[str, str, str], ...]  # (field, was, now) in the CLI's words
    cost: float  # how large the edit is: 1 a changed field, plus how far a number moved
    command: str
    checked: str  # "plans": a plan built on this GPU; "validate": validate() passed, no GPU to ask
    plan_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Explanation:
    config: SdpaConfig
    gpu: bool
    verdict: str  # of the configuration as given: SUPPORTED, REFUSED or VALID
    modes: tuple[str, ...]
    implementations: tuple[str, ...]
    cells: tuple[Cell, ...]
    rules: tuple[Refusal, ...]  # the tool's own findings (every cell carries them too)
    versions: tuple[tuple[str, str], ...]  # (what, installed)
    requirements: tuple[Requirement, ...]
    nearest: tuple[Nearest, ...]
    searched: int  # candidate edits judged
    gpu_note: str = ""  # where a GPU is needed to know more, and why there is none
    seconds: float = 0.0

    def cell(self, implementation: str, mode: str) -> Cell:
        return next(c for c in self.cells if (c.implementation, c.heuristic_mode) == (implementation, mode))

    def refusals(self) -> list[tuple[Refusal, list[Cell]]]:
        """Each distinct refusal once, with the cells it refused."""
        seen: dict[Refusal, list[Cell]] = {}
        for cell in self.cells:
            for r in cell.refusals:
                seen.setdefault(r, []).append(cell)
        return list(seen.items())

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["config"] = self.config.to_dict()
        d["nearest"] = [{**dataclasses.asdict(n), "config": n.config.to_dict()} for n in self.nearest]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Explanation:
        return _load(cls, d)


_RECORDS = {"cells": Cell, "refusals": Refusal, "rules": Refusal, "requirements": Requirement, "nearest": Nearest}  # fmt: skip


def _load(cls: type, d: dict[str, Any]) -> Any:
    """A record from its dict: the configuration, nested records, and lists back to tuples."""
    values = {}
    for key, value in d.items():
        if key == "config":
            value = config_from_dict(value)
        elif key in _RECORDS:
            value = tuple(_load(_RECORDS[key], item) for item in value)
        elif isinstance(value, list):
            value = tuple(tuple(x) if isinstance(x, list) else x for x in value)
        values[key] = value
    return cls(**values)


# ---- what a refusal names ---------------------------------------------------------------
def named_requirements(message: str) -> tuple[str, ...]:
    """The minimum cuDNN versions and GPU architectures a message names as needed:
    'requires cuDNN 9.21.0 or above' -> ('cuDNN 9.21.0',); 'only supported on Blackwell
    architecture with cuDNN version 9.13.0 and newer' -> ('Blackwell', 'cuDNN 9.13.0')."""
    archs = [(m.start(), (m.group(1) or m.group(2)).capitalize()) for m in _ARCH_NEEDED.finditer(message)]
    versions = [
        (m.start(), "cuDNN " + next(g for g in m.groups() if g)) for m in _MIN_VERSION.finditer(message)
    ]
    return tuple(dict.fromkeys(what for _at, what in sorted(archs + versions)))


def architecture(compute_capability: str) -> str:
    """'9.0' -> 'Hopper'; '' when unknown."""
    try:
        cc = tuple(int(x) for x in compute_capability.split(".")[:2])
    except ValueError:
        return ""
    return next((name for name, since in reversed(ARCHITECTURES) if cc >= since), "")


def requirement(needed: str, message: str, env: Environment) -> Requirement:
    """What a refusal names as needed ('cuDNN 9.21.0', 'Blackwell') against this machine."""
    if needed.startswith("cuDNN "):
        version, have = needed.removeprefix("cuDNN "), env.cudnn_backend_version
        want, got = parse_version(version), parse_version(have) if have else None
        met = None if want is None or got is None else got >= want
        return Requirement("cuDNN", version, have, met, message)
    names = [name for name, _cc in ARCHITECTURES]
    have = architecture(env.compute_capability) if env.gpu_available else ""
    met = names.index(have) >= names.index(needed) if have else None
    installed = f"{have} ({env.compute_capability})" if have else ""
    return Requirement("architecture", needed, installed, met, message)


# ---- asking cuDNN -----------------------------------------------------------------------
def planning_refusals(step: str, message: str, graph: str) -> list[Refusal]:
    """A planning failure names both sides (the backend's, the python engines'): a refusal for each."""
    _head, _, why = message.partition(" (")
    parts = _PIECES.split(why.removesuffix(")")) if why and _PIECES.search(f"; {why}") else [message]
    engines = [SOURCE_OPENSOURCE if part.startswith("python engines") else SOURCE_BACKEND for part in parts]
    return [_refusal(source, part, step, graph) for source, part in zip(engines, parts, strict=True)]


def _refusal(source: str, message: str, step: str, graph: str) -> Refusal:
    return Refusal(source, message, step, graph, needs=named_requirements(message))


class _Prober:
    """Asks cuDNN about each graph once: validate() anywhere, plans (one heuristic mode, a fresh
    graph each, since plans may be created once per graph) on a GPU."""

    def __init__(self, gpu: bool, handle: Any) -> None:
        self.gpu, self.handle = gpu, handle
        self.planned, self.budget = 0, MAX_PLANNED  # graphs planned; the most the search may plan
        self._seen: dict[tuple, Answer] = {}

    def verdict(self, config: SdpaConfig, mode: str | None) -> tuple[Names, Names, tuple[Refusal, ...]]:
        """The forward's plan names, the backward's, and the refusals; mode None: validate() only."""
        fwd, refusals = self._graph(config, False, mode if self.gpu else None)
        bwd: Names = ()
        if config.backward:
            bwd, more = self._graph(config, True, mode if self.gpu else None)
            refusals = refusals + more
        return fwd, bwd, tuple(refusals)

    def _graph(self, config: SdpaConfig, backward: bool, mode: str | None) -> Answer:
        same = {"heuristics": SdpaConfig().heuristics} | ({"implementation": "auto"} if backward else {})
        key = (config.replace(**same), backward, mode)  # the graph depends on neither
        if key not in self._seen:
            self._seen[key] = self._ask(config, backward, mode)
        return self._seen[key]

    def _ask(self, config: SdpaConfig, backward: bool, mode: str | None) -> Answer:
        graph_name = "backward" if backward else "forward"
        try:
            g = define_and_validate(config, self.handle, backward=backward)
        except GraphBuildError as exc:  # the keyword guard is the tool's; the rest, validate()'s
            source = SOURCE_TOOL if isinstance(exc.__cause__, UnsupportedOption) else SOURCE_VALIDATE
            return (), [_refusal(source, exc.message, exc.phase, graph_name)]
        if mode is None:
            return (), []
        import cudnn

        self.planned += 1
        graph, names, step = g.graph, (), "build_operation_graph"
        try:
            graph.build_operation_graph()
            step = "create_execution_plans"
            graph.create_execution_plans([getattr(cudnn.heur_mode, mode)])
            names = tuple(str(graph.get_plan_name_at_index(i)) for i in range(graph.get_execution_plan_count()))  # fmt: skip
            step = "check_support"
            graph.check_support()
            step = "build_plans"
            graph.build_plans()
        except Exception as exc:  # every refusal is an answer here, whatever its type
            return names, planning_refusals(step, str(exc).strip() or type(exc).__name__, graph_name)
        return names, []


# ---- the nearest configurations that work -----------------------------------------------
def run_command(config: SdpaConfig, named: tuple[str, ...] = ()) -> str:
    """`sdpa-explorer run` (as the user starts it: model/launch.py) with an option for every field
    that is not the default, and for the fields `named` (the edit's) even where they are."""
    words = [*launcher(), "run"]
    for f in FIELDS:
        value = getattr(config, f.name)
        if value is None or (value == f.default and f.name not in named):
            continue
        if isinstance(f, Switch):
            words.append(f.option if value else f"--no-{f.option.removeprefix('--')}")
        else:
            words += [f.option, f.format(value)]
    return shlex.join(words)


def _nearby(value: int, step: int) -> list[int]:
    """The nearest multiples of `step` below and above `value`, and the nearest powers of two."""
    down, up = (value - 1) // step * step, value // step * step + step
    below = 1 << (value - 1).bit_length() - 1 if value > 1 else 0
    return [x for x in dict.fromkeys((down, up, below, 1 << value.bit_length())) if x >= 1 and x != value]


def _edits(config: SdpaConfig, modes: tuple[str, ...], refusals: list[Refusal]) -> Iterator[dict[str, Any]]:
    """Single edits: the shape's (_shape_edits), every other dtype, layout and implementation, the other
    causal alignment, each heuristic mode alone, a score modifier's own, each option to its default."""
    if min(config.h_q, config.h_kv, config.d_qk, config.d_v) < 1:
        return  # a shape the field's own check refuses: nothing near it to search
    yield from _shape_edits(config, refusals)
    for name in ("dtype", "layout", "implementation"):
        yield from ({name: choice} for choice in FIELD[name].choices if choice != getattr(config, name))
    if config.causal != "none":
        yield from ({"causal": c} for c in FIELD["causal"].choices if c not in ("none", config.causal))
    yield from ({"heuristics": (mode,)} for mode in modes if (mode,) != config.heuristics)
    yield from modifier_edits(config)  # a score modifier's own mask, in place of the one cuDNN refuses
    yield from ({f.name: f.default} for f in dataclasses.fields(SdpaConfig) if _droppable(config, f.name))


def _shape_edits(config: SdpaConfig, refusals: list[Refusal]) -> Iterator[dict[str, Any]]:
    """Head dims to nearby multiples, h_kv to the nearest divisors of h_q, h_q to multiples of h_kv."""
    steps = {int(n) for r in refusals for n in re.findall(r"multiple of (\d+)", r.message)}
    for names in [("d_qk",), ("d_v",)] + ([("d_qk", "d_v")] if config.d_qk == config.d_v else []):
        for step in sorted({HEAD_DIM_STEP, *steps}):
            for d in _nearby(getattr(config, names[0]), step):
                yield dict.fromkeys(names, d)
    divisors = [d for d in range(1, config.h_q + 1) if config.h_q % d == 0]
    below, above = [d for d in divisors if d < config.h_kv], [d for d in divisors if d > config.h_kv]
    yield from ({"h_kv": d} for d in (below[-1:] + above[:1]))
    if config.h_q % config.h_kv:
        yield {"h_q": config.h_q // config.h_kv * config.h_kv or config.h_kv}
        yield {"h_q": (config.h_q // config.h_kv + 1) * config.h_kv}


def _droppable(config: SdpaConfig, name: str) -> bool:
    """An option set away from its default (the shape is the question, never an option)."""
    return name in FIELD and FIELD[name].group != "shape" and getattr(config, name) != FIELD[name].default


def _settled(config: SdpaConfig, changes: dict[str, Any]) -> SdpaConfig:
    """The edit, and every option the tool's rules then name set back to its default (dropping the
    backward pass drops the deterministic option with it; one side of the lengths, the other)."""
    edited = config.replace(**changes)
    for e in validate(edited):
        if e.field not in changes and _droppable(edited, e.field):
            edited = edited.replace(**{e.field: FIELD[e.field].default})
    return edited


def _cost(config: SdpaConfig, edited: SdpaConfig) -> tuple[float, tuple[tuple[str, str, str], ...]]:
    cost, changes, same = 0.0, [], moved_inside(config, edited)  # a mask moved into its score modifier
    for f in FIELDS:
        was, now = getattr(config, f.name), getattr(edited, f.name)
        if was == now:
            continue
        changes.append((f.name, f.format(was) or f.default_text(), f.format(now) or f.default_text()))
        moved = abs(now - was) / was if f.kind == "int" and isinstance(was, int) and was and now else 0.0
        cost += (0.25 if same else 0.5 if f.name in SAME_MATH else 1.0) + moved
    return cost, tuple(changes)


def _candidates(config: SdpaConfig, edits: list[dict[str, Any]]) -> list[tuple[float, SdpaConfig, tuple]]:
    best: dict[SdpaConfig, tuple[float, SdpaConfig, tuple]] = {}
    for changes in edits:
        try:
            edited = _settled(config, changes)
        except (TypeError, ValueError):
            continue
        cost, words = _cost(config, edited)
        if words and (edited not in best or cost < best[edited][0]):
            best[edited] = (cost, edited, words)
    return sorted(best.values(), key=lambda c: c[0])


def _works(prober: _Prober, config: SdpaConfig) -> tuple[bool, tuple[str, ...]]:
    """validate() of the tool and of cuDNN, then (on a GPU) a plan that builds in a mode it asks for."""
    if validate(config) or prober.verdict(config, None)[-1]:
        return False, ()
    if not prober.gpu:
        return True, ()
    for mode in config.heuristics:
        if prober.planned >= prober.budget:
            return False, ()
        fwd, _bwd, refusals = prober.verdict(config, mode)
        if not refusals:
            return True, fwd
    return False, ()


def nearest(
    config: SdpaConfig, prober: _Prober, modes: tuple[str, ...], refusals: list[Refusal]
) -> tuple[list[Nearest], int]:
    """The closest working configurations, smallest edit first; two edits only when no single one
    works. Returns them and how many candidates were judged."""
    prober.budget = prober.planned + MAX_PLANNED
    singles = list(_edits(config, modes, refusals))
    pairs = [{**a, **b} for i, a in enumerate(singles) for b in singles[i + 1 :] if not a.keys() & b.keys()]
    found: list[Nearest] = []
    judged = 0
    for edits in (singles, pairs):
        for cost, edited, words in _candidates(config, edits):
            if len(found) >= MAX_NEAREST or judged >= MAX_CANDIDATES:
                break
            judged += 1
            ok, names = _works(prober, edited)
            if ok:
                command = run_command(edited, tuple(w[0] for w in words))
                checked = "plans" if prober.gpu else "validate"
                found.append(Nearest(edited, words, round(cost, 3), command, checked, names))
        if found:
            break
    return found, judged


# ---- explain ----------------------------------------------------------------------------
def _versions(env: Environment) -> tuple[tuple[str, str], ...]:
    arch = architecture(env.compute_capability)
    gpu = f"{env.gpu_name}, compute capability {env.compute_capability}" + (f" ({arch})" if arch else "")
    return (
        ("cuDNN backend", env.cudnn_backend_version or "not loaded"),
        ("cuDNN frontend", env.frontend_version or "not importable"),
        ("GPU", gpu if env.gpu_available else f"none ({env.unavailable_reason})"),
        ("open-source engines", env.python_engines or "unknown"),
    )


def _cell(prober: _Prober, config: SdpaConfig, rules: list[Refusal], impl: str, mode: str) -> Cell:
    fwd, bwd, refusals = prober.verdict(config.replace(implementation=impl), mode)
    every = (*rules, *refusals)
    status = REFUSED if every else (SUPPORTED if prober.gpu else VALID)
    return Cell(impl, mode, status, fwd, bwd, every)


def explain(
    config: SdpaConfig, *, gpu: bool, handle: Any = None, environment: Environment | None = None
) -> Explanation:
    """Every implementation under every heuristic mode of the installed frontend, the refusals by
    source, the versions they name, and (when the configuration as given is refused) the nearest
    configurations that work. `gpu` False: validate() only, and each answer says so."""
    import cudnn

    from .environment import collect

    t0 = time.perf_counter()
    logging.getLogger("cudnn").setLevel(logging.ERROR)  # each decline reaches the user in the result
    env = environment or collect()
    if gpu and handle is None:
        import torch

        torch.cuda.init()
        handle = cudnn.create_handle()
    prober = _Prober(gpu, handle)
    modes = tuple(cudnn.heur_mode.__members__)
    impls = FIELD["implementation"].choices
    rules = [Refusal(SOURCE_TOOL, e.message, "rules", field=e.field) for e in validate(config)]
    cells = tuple(_cell(prober, config, rules, impl, mode) for impl in impls for mode in modes)
    own = {c.status for c in cells if c.implementation == config.implementation and c.heuristic_mode in config.heuristics}  # fmt: skip
    verdict = (SUPPORTED if gpu else VALID) if own - {REFUSED} else REFUSED
    every = [r for c in cells for r in c.refusals]
    found, judged = nearest(config, prober, modes, every) if verdict == REFUSED else ([], 0)
    requirements = {(need, r.message): requirement(need, r.message, env) for r in every for need in r.needs}
    why = env.unavailable_reason or "not asked for"
    note = "" if gpu else f"no GPU ({why}): only validate() was asked; what passed it {NEEDS_GPU}"
    return Explanation(
        config, gpu, verdict, modes, tuple(impls), cells, tuple(rules), _versions(env),
        tuple(requirements.values()), tuple(found), judged, note, round(time.perf_counter() - t0, 3),
    )  # fmt: skip
