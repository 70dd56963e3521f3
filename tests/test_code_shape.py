"""The code keeps the shape that lets one idea live in one place: small modules with one job
each (functions past a complexity of 20 are refused by the linter's settings in pyproject)."""

from pathlib import Path

import tui

MAX_MODULE_LINES = 450


def test_no_module_of_the_package_is_over_450_lines():
    root = Path(tui.__file__).parent
    sizes = {
        str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py")
    }
    too_long = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"split these by job: {too_long}"
