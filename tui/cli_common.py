"""What the commands share: the consoles, bad input said on one line with exit 2, and the
exports a measuring command writes (checked before the run, written after it)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False)


def _fail_usage(messages: list[str]) -> None:
    """Bad input: each problem on one line (never wrapped: scripts read them), exit 2."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for m in messages:
        err.print(f"[red]error:[/red] {escape(m)}")
    sys.exit(EXIT_USAGE)


def check_export_paths(paths: dict) -> None:
    """Before the run: a bad export path is bad input, said before minutes of work, not after."""
    from .export import path_problems

    problems = path_problems(paths)
    if problems:
        _fail_usage(problems)


def save_exports(result, seed: int, paths: dict) -> None:
    """Each export written; a failure (something not a file appeared since the check) exits 2."""
    from .export import write_export

    for kind, path in ((k, p) for k, p in paths.items() if p):
        try:
            said = write_export(kind, path, result, seed)
        except OSError as exc:
            _fail_usage([f"--save-{kind}: cannot write {path}: {exc.strerror or exc}"])
        _console(stderr=True).print(escape(said), soft_wrap=True)
