"""The engine's code, copied into one standalone file: what a piece of glue needs of the engine,
found transitively and written verbatim, so that the file runs with no package around it.

Starting from the names the glue reads, `bundle()` resolves each name through its module's
imports (`from .x import y` and `from . import x` alike) to the statement that defines it, reads
which names that statement needs when the file runs (symtable, scope by scope; annotations are
not evaluated, the file starting with `from __future__ import annotations`, so what only they
name is not copied), and so on. Modules are written in the order they import each other, each
statement in its source order with the comment above it, and the imports they need at the top.
The glue comes last, only what its statements that bind no name (the call of main()) reach.

An engine module left out (the FP8 recipe, for a configuration that is not FP8) is one the
engine's code reaches only as `alias.NAME` behind a branch the file does not take; the file sets
the alias to None. Function-local imports are copied as written: a top-level function must have
no relative one (it could not run outside the package), while methods of a copied class may
(SdpaConfig.label reads its fields): the file calls none of those.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import symtable
import sys
import textwrap
from dataclasses import dataclass
from importlib.util import resolve_name

PACKAGE = __package__.rpartition(".")[0]
# The layers whose code a script copies; their modules go by their bare names (config, graph),
# which are unique across them.
LAYERS = ("model", "store", "engine")
# The engine modules whose definitions the glue may name by their bare name (each name once).
SOURCES = (
    "layouts",
    "config",
    "tensor_plan",
    "results",
    "tolerances",
    "reference",
    "fp8",
    "storage",
    "graph",
    "tensors",
    "passes",
    "measure",
    "rates",
    "timing",
)
PAGE = 100  # the width of the file's comments


class BundleError(Exception):
    """What the glue needs cannot be copied into a standalone script (the message says why)."""


@dataclass(frozen=True)
class _Piece:
    """One top-level statement: the names it binds, its lines as written (with the comment just
    above it), and what it reads when the script runs: names, `alias.NAME` attributes, and the
    names it reads bare (not as the base of an attribute)."""

    module: str
    line: int  # of the statement (its first decorator)
    names: tuple[str, ...]
    text: str
    first: int  # the first line of `text`, the comment above the statement included
    end: int
    reads: frozenset[str]
    attributes: frozenset[tuple[str, str]]
    bare: frozenset[str]
    is_def: bool
    local_engine_import: str = ""  # a relative import inside a top-level function


class _Source:
    """What each top-level name of one module is: a statement of it, a standard-library or
    third-party import, an engine name imported from another module, or an engine module."""

    def __init__(self, name: str, text: str, package: str):
        self.name = name
        self.pieces: dict[str, _Piece] = {}
        self.statements: list[_Piece] = []
        # name -> ("import", module, as) or ("from", module, name, as)
        self.imports: dict[str, tuple[str, ...]] = {}
        self.engine: dict[str, tuple[str, str]] = {}  # name -> (module, its name there)
        self.aliases: dict[str, str] = {}  # name -> engine module
        self.depends: set[str] = set()  # engine modules imported at module level
        self.foreign: dict[str, str] = {}  # name -> the package's module (not the engine's) it is from
        tree = ast.parse(text)
        self.doc = ast.get_docstring(tree) or ""
        lines = text.splitlines(keepends=True)
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = ("import", a.name, a.asname)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node, package)
            elif not _is_docstring(node):
                piece = _piece(name, node, lines)
                self.statements.append(piece)
                self.pieces.update(dict.fromkeys(piece.names, piece))

    def _import_from(self, node: ast.ImportFrom, package: str) -> None:
        if node.module == "__future__":
            return
        if not node.level:
            for a in node.names:
                self.imports[a.asname or a.name] = ("from", node.module or "", a.name, a.asname)
            return
        target = resolve_name("." * node.level + (node.module or ""), package)
        if target in {f"{PACKAGE}.{layer}" for layer in LAYERS}:  # from . import fp8
            for a in node.names:
                module = _bare(f"{target}.{a.name}")
                self.aliases[a.asname or a.name] = module
                self.depends.add(module)
            return
        module = _bare(target)
        if not module:
            self.foreign.update({a.asname or a.name: target for a in node.names})
            return
        for a in node.names:
            self.engine[a.asname or a.name] = (module, a.name)
        self.depends.add(module)


def _bare(target: str) -> str:
    """The bare name of a module of the copied layers (tui.model.config: config); '' for the rest."""
    for layer in LAYERS:
        if target.startswith(f"{PACKAGE}.{layer}."):
            return target.removeprefix(f"{PACKAGE}.{layer}.")
    return ""


def _home(module: str) -> str:
    """The package holding the copied module of this bare name."""
    for layer in LAYERS:
        if importlib.util.find_spec(f"{PACKAGE}.{layer}.{module}") is not None:
            return f"{PACKAGE}.{layer}"
    raise BundleError(f"no module named {module} in {', '.join(LAYERS)}")


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _piece(module: str, node: ast.stmt, lines: list[str]) -> _Piece:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    first = start
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1  # the comment just above belongs to the definition
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        names: tuple[str, ...] = (node.name,)
    elif isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = tuple(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    else:
        names = ()
    own = "".join(lines[start - 1 : node.end_lineno])
    reads, attributes, bare = _reads(own, node)
    local = ""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        local = next(
            (ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.level), ""
        )
    return _Piece(
        module,
        start,
        names,
        "".join(lines[first - 1 : node.end_lineno]),
        first,
        node.end_lineno or start,
        reads - set(names),
        attributes,
        bare,
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef),
        local,
    )


def _reads(text: str, node: ast.stmt) -> tuple[frozenset[str], frozenset[tuple[str, str]], frozenset[str]]:
    """The global names a statement reads when it runs: at module level, and in every scope inside
    it the names it neither binds nor finds in an enclosing function. Annotations are skipped."""
    table = symtable.symtable("from __future__ import annotations\n" + text, "<copied>", "exec")
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    scopes = list(table.get_children())
    while scopes:
        scope = scopes.pop()
        names |= {s.get_name() for s in scope.get_symbols() if s.is_referenced() and s.is_global()}
        scopes.extend(scope.get_children())
    bases = {
        id(n.value): (n.value.id, n.attr)
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
    }
    bare = {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in bases
    }
    return frozenset(names), frozenset(bases.values()), frozenset(bare)


class _Bundle:
    """The statements copied so far, the imports they need and the engine modules they read
    through an alias, found from the glue's reads."""

    def __init__(self, left_out: frozenset[str]):
        self.left_out = left_out
        self.copied: dict[tuple[str, int], _Piece] = {}
        self.owner: dict[str, _Piece] = {}  # a name in the script -> the statement that binds it
        self.imports: set[tuple[str, ...]] = set()
        self.aliases: dict[str, str] = {}

    def source(self, module: str) -> _Source:
        return _engine_source(module)

    def copy(self, piece: _Piece, src: _Source) -> None:
        if (piece.module, piece.line) in self.copied:
            return
        if piece.module in self.left_out:
            raise BundleError(
                f"{piece.names[0]} is in {piece.module}.py, which this configuration leaves out"
            )
        if piece.local_engine_import:
            raise BundleError(
                f"{piece.module}.{piece.names[0]} runs `{piece.local_engine_import}`, which a standalone "
                "script cannot: import it at the module's top"
            )
        for name in piece.names:
            if self.owner.get(name, piece) is not piece:
                raise BundleError(
                    f"two definitions named {name!r}: in {self.owner[name].module}.py and {piece.module}.py"
                )
            self.owner[name] = piece
        self.copied[(piece.module, piece.line)] = piece
        self.read(piece, src)

    def read(self, piece: _Piece, src: _Source, glue: frozenset[str] = frozenset()) -> None:
        """Copy what `piece`, a statement of `src`, reads (names bound by the glue excepted)."""
        where = f"{piece.module}.{piece.names[0] if piece.names else piece.line}"
        for name in sorted(piece.reads - glue):
            if name in src.aliases:
                if name in piece.bare:
                    raise BundleError(f"{where} uses the module {name} itself, not one of its names")
                self.alias(name, src.aliases[name])
                for base, attr in sorted(piece.attributes):
                    if base == name and src.aliases[name] not in self.left_out:
                        self.need(self.source(src.aliases[name]), attr, where)
            else:
                self.need(src, name, where, glue=bool(glue))

    def need(self, src: _Source, name: str, where: str, glue: bool = False) -> None:
        """Copy the statement that `name` is in `src`, or take its import."""
        if name in src.pieces:
            self.copy(src.pieces[name], src)
        elif name in src.engine:
            module, original = src.engine[name]
            if original != name:
                raise BundleError(
                    f"{where} reads {name}, imported as another name: the script has one namespace"
                )
            self.need(self.source(module), name, where)
        elif name in src.imports:
            self.imports.add(src.imports[name])
        elif name in src.foreign:
            raise BundleError(f"{where} reads {name}, which is {src.foreign[name]}'s, not the engine's")
        elif hasattr(builtins, name):
            pass
        elif glue and name in sys.stdlib_module_names:  # json.dumps, sys.exit
            self.imports.add(("import", name, None))
        elif glue and (module := self.find(name)):
            self.need(self.source(module), name, where)
        else:
            raise BundleError(f"{where} reads {name!r}, and {src.name}.py does not say what it is")

    def find(self, name: str) -> str | None:
        """The engine module that defines `name` (for the glue, which names it bare)."""
        found = [m for m in SOURCES if name in self.source(m).pieces]
        if len(found) > 1:
            raise BundleError(f"the glue reads {name!r}, defined in {' and '.join(found)}: name its module")
        return found[0] if found else None

    def alias(self, name: str, module: str) -> None:
        if self.aliases.setdefault(name, module) != module:
            raise BundleError(f"{name} names two modules: {self.aliases[name]} and {module}")
        if module not in self.left_out:
            self.imports.add(("import", "sys", None))

    def order(self) -> list[str]:
        """The modules with copied statements, each after every engine module it imports."""
        done: list[str] = []
        visiting: set[str] = set()

        def visit(module: str) -> None:
            if module in done:
                return
            if module in visiting:
                raise BundleError(f"{module}.py is part of an import cycle")
            visiting.add(module)
            for dep in sorted(self.source(module).depends):
                visit(dep)
            done.append(module)

        used = {p.module for p in self.copied.values()}
        for module in sorted(used, key=lambda m: (SOURCES + (m,)).index(m)):
            visit(module)
        return [m for m in done if m in used]


def bundle(
    glue: list[str],
    names: tuple[str, ...],
    context: str,
    max_lines: int,
    left_out: frozenset[str] = frozenset(),
) -> str:
    """A standalone file's code: `glue` (top-level statements, written last, as given) and every
    engine statement it needs, found transitively and written verbatim in dependency order, with
    their imports at the top. The glue defines only `names`, no function of it over `max_lines`;
    its other names are what they are in the module `context`, or the engine's modules and
    definitions of that name. Engine modules in `left_out` are not copied: the engine's code may
    reach them only through an alias (`fp8.NAME`), which the file then sets to None."""
    b = _Bundle(left_out)
    here = _glue_names(context)
    package = context.rpartition(".")[0]
    statements = _Source("glue", "\n\n".join(block.rstrip("\n") for block in glue) + "\n", package)
    kept = _reached(statements, names, max_lines)
    defined = frozenset(n for p in kept for n in p.names)
    for piece in kept:
        b.read(piece, here, defined)
    clash = defined & (set(b.owner) | set(b.aliases))
    if clash:
        raise BundleError(f"the glue defines {', '.join(sorted(clash))}, which the engine's code defines too")
    sections = [_imports(b.imports)]
    for module in b.order():
        pieces = sorted((p for p in b.copied.values() if p.module == module), key=lambda p: p.line)
        sections.append(
            _rule(f"# ---- the engine's {module}.py") + _summary(b.source(module)) + _join(pieces)
        )
    return "\n\n".join(sections) + "\n\n" + _glue_section(b, kept)


@functools.cache
def _engine_source(module: str) -> _Source:
    home = _home(module)
    return _Source(module, inspect.getsource(importlib.import_module(f"{home}.{module}")), home)


@functools.cache
def _glue_names(context: str) -> _Source:
    """What the glue's names are: the imports of the module `context`, the engine's modules by
    their name (fp8), and (through _Bundle.find) the engine's definitions by theirs."""
    module = importlib.import_module(context)
    here = _Source("glue", inspect.getsource(module), context.rpartition(".")[0])
    here.pieces.clear()  # that module's own definitions are not the glue's
    here.aliases.update({m: m for m in SOURCES})
    return here


def _reached(glue: _Source, names: tuple[str, ...], max_lines: int) -> list[_Piece]:
    """The glue's statements that its statements binding no name (the call of main) reach, in
    order; each definition one of `names`, each function at most `max_lines` long."""
    bound = [n for p in glue.statements for n in p.names]
    for name in bound:
        if name not in names or bound.count(name) > 1:
            raise BundleError(f"the glue defines {name} " + ("twice" if name in names else "unlisted"))
    todo = [p for p in glue.statements if not p.names]
    reached = {id(p) for p in todo}
    while todo:
        for name in todo.pop().reads & glue.pieces.keys():
            if id(glue.pieces[name]) not in reached:
                reached.add(id(glue.pieces[name]))
                todo.append(glue.pieces[name])
    kept = [p for p in glue.statements if id(p) in reached]
    for p in kept:
        if p.is_def and p.text.count("\n") > max_lines:
            raise BundleError(f"glue {p.names[0]} is longer than {max_lines} lines")
    return kept


def _imports(imports: set[tuple[str, ...]]) -> str:
    """`from __future__ import annotations`, then the standard library's imports, then the others."""
    groups: dict[bool, list[str]] = {True: [], False: []}
    froms: dict[str, list[str]] = {}
    for imp in imports:
        if imp[0] == "import":
            _, module, asname = imp
            groups[_stdlib(module)].append(f"import {module}" + (f" as {asname}" if asname else ""))
        else:
            _, module, name, asname = imp
            froms.setdefault(module, []).append(name + (f" as {asname}" if asname else ""))
    for module, names in froms.items():
        groups[_stdlib(module)].append(f"from {module} import {', '.join(sorted(names))}")
    blocks = [
        sorted(groups[kind], key=lambda line: (line.startswith("from"), line)) for kind in (True, False)
    ]
    return "from __future__ import annotations\n\n" + "\n\n".join("\n".join(b) for b in blocks if b) + "\n"


def _stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def _rule(title: str) -> str:
    return f"{title} {'-' * (PAGE - len(title) - 1)}\n"


def _summary(src: _Source) -> str:
    """The first sentence of a module's docstring, as comment lines."""
    sentence = src.doc.split("\n\n")[0].replace("\n", " ").split(". ")[0].rstrip(".") + "."
    return "".join(f"# {line}\n" for line in textwrap.wrap(sentence, PAGE - 2)) + "\n\n"


def _join(pieces: list[_Piece]) -> str:
    """Statements as in a module: two blank lines around a definition; between constants, one
    where their module has one (or more) and none where it has none."""
    text = ""
    for i, p in enumerate(pieces):
        if i:
            before = pieces[i - 1]
            adjacent = p.module == before.module and p.first == before.end + 1
            text += "\n\n\n" if p.is_def or before.is_def else "\n" if adjacent else "\n\n"
        text += p.text.rstrip("\n")
    return text + "\n"


def _glue_section(b: _Bundle, glue: list[_Piece]) -> str:
    """The glue, after the engine modules the engine's code reads as an alias (`fp8.NAME`)."""
    lines = []
    for name, module in sorted(b.aliases.items()):
        if module in b.left_out:
            lines.append(
                f"{name} = None  # not used by this configuration: the engine's {name}.NAME branches are not taken"
            )
        else:
            lines.append(
                f"{name} = sys.modules[__name__]  # the engine's code reads {module}.py as {name}.NAME: above"
            )
    aliases = "".join(line + "\n" for line in lines)
    return _rule("# ---- this configuration, and the glue that runs it") + "\n" + aliases + _join(glue)
