"""What the commands share: the consoles, bad input said on one line with exit 2, the engine
session they run in, a saved result or kept run read by file or id, and the exports a measuring
command writes (checked before the run, written after it)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from ..model.config import SdpaConfig
from ..model.results import RunResult

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
ERROR = "Error:"  # click's own word for a usage error: the tool's refusals read alike


def terminal(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False)


def error_markup(message: str) -> str:
    """One error line as every command prints it (`message` is plain text, never markup)."""
    return f"[red]{ERROR}[/red] {escape(message)}"


def say_error(message: str) -> None:
    """An error on standard error, on one line (never wrapped: scripts read them)."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(error_markup(message))


def fail_usage(messages: list[str]) -> None:
    """Bad input: each problem on one line, as click says its own usage errors, exit 2."""
    for m in messages:
        say_error(m)
    sys.exit(EXIT_USAGE)


def check_export_paths(paths: dict) -> None:
    """Before the run: a bad export path is bad input, said before minutes of work, not after."""
    from ..present.export import path_problems

    problems = path_problems(paths)
    if problems:
        fail_usage(problems)


def save_exports(result, seed: int, paths: dict) -> bool:
    """Each export written whole or not at all; a failure (a full disk, or something not a file
    appeared since the check) said in one line naming the option and the file. Whether all were."""
    from ..present.export import write_export

    err, saved = Console(stderr=True, highlight=False, soft_wrap=True), True
    for kind, path in ((k, p) for k, p in paths.items() if p):
        try:
            said = write_export(kind, path, result, seed)
        except OSError as exc:
            say_error(f"--save-{kind}: cannot write {path}: {exc.strerror or exc}")
            saved = False
            continue
        err.print(escape(said))
    return saved


def engine_session():
    """The engine process the commands run their configurations in."""
    from ..process.session import EngineSession

    return EngineSession()


def preset_config(name: str) -> SdpaConfig:
    from ..store.presets import find

    if not name.strip():
        fail_usage(["--preset: empty; name a preset (`sdpa-explorer presets` lists them)"])
    try:
        return find(name).config
    except KeyError as exc:
        fail_usage([f"--preset: {exc.args[0]}"])
    except ValueError as exc:
        fail_usage([f"--preset: {exc}"])
    raise AssertionError  # unreachable: fail_usage exits


def is_run_id(text: str) -> bool:
    """A run's id in the history: ASCII digits within SQLite's integer range (anything else is a path)."""
    return text.isascii() and text.isdigit() and len(text) <= 19 and int(text) < 1 << 63


def read_result(path: str, option: str):
    """A saved RunResult (any schema this version reads), or a kept run by its id (where no file
    has that name); exit 2 naming the file when it is not one (and, when it is not JSON at all,
    what `option` reads)."""
    import os

    from ..model.config import ConfigError
    from ..store.reading import NotJson, NotText, ParseError, ReadError, read_json, shown_path

    if is_run_id(path) and not os.path.exists(path):
        return run_from_history(int(path), option)
    try:
        return RunResult.from_dict(read_json(path))
    except (NotText, NotJson):  # a CSV, a picture: the parser's words would say nothing more
        fail_usage([f"{option}: {shown_path(path)} is not a saved result (not JSON); {option.split()[0]} "
                    f"reads the JSON that --save-json writes, or a run's id in the history "
                    "(`sdpa-explorer history` lists them)"])  # fmt: skip
    except ReadError as exc:
        fail_usage([f"{option}: {exc}"])
    except ParseError as exc:
        fail_usage([f"{option}: {shown_path(path)} is not a saved result: {exc.why}"])
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        fail_usage([f"{option}: {shown_path(path)} is not a saved result: {exc}"])
    raise AssertionError  # unreachable: fail_usage exits


def run_from_history(run_id: int, option: str) -> RunResult:
    """A run kept in the history; exit 2 naming the id when there is none."""
    from ..store.history import History, HistoryError

    try:
        with History() as history:
            return history.load(run_id)
    except KeyError as exc:
        fail_usage([f"{option}: {exc.args[0]}"])
    except HistoryError as exc:
        fail_usage([f"{option}: {exc}"])
    raise AssertionError  # unreachable: fail_usage exits
