"""The table of `run` options in docs/CLI.md, generated from the fields' declarations (fields.py), so
the docs cannot drift from what the CLI takes.

    python -m tui.model.option_table docs/CLI.md    rewrites the table between its markers
"""

from __future__ import annotations

import sys
from pathlib import Path

from .fields import FIELDS, SHORTHANDS, Switch

README_START, README_END = "<!-- fields:start -->", "<!-- fields:end -->"


def option_table() -> str:
    """The `run` options as a Markdown table, one row a field, then the shorthands."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [
        "| option | field | values | default | what it means |",
        "|---|---|---|---|---|",
    ]
    for f in FIELDS:
        option = f.option_pair if isinstance(f, Switch) else f.option
        default = f.default_text()
        rows.append(
            f"| `{option}` | `{f.name}` | {cell(f.accepts())} | {f'`{default}`' if default else ''} "
            f"| {cell(f.help)} |"
        )
    shorthands = "; ".join(
        f"`--{short}` sets {' and '.join(f'`{n}`' for n in names)}" for short, names in SHORTHANDS.items()
    )
    return "\n".join([*rows, "", f"Shorthands: {shorthands}."])


def with_option_table(readme: str) -> str:
    """`readme` with the text between its field markers replaced by the current table."""
    head, start, rest = readme.partition(README_START)
    _old, end, tail = rest.partition(README_END)
    if not start or not end:
        raise ValueError(f"no {README_START} ... {README_END} markers")
    return f"{head}{start}\n{option_table()}\n{end}{tail}"


def main(argv: list[str]) -> int:
    """Print the option table, or rewrite it in the Markdown files named."""
    if not argv:
        print(option_table())
    for name in argv:
        path = Path(name)
        path.write_text(with_option_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
