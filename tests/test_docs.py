"""The README is a guide that stays short, and every link in it and in docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_a_guide_of_at_most_250_lines_with_its_picture():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n") <= 250
    assert "](docs/dashboard.svg)" in readme and (ROOT / "docs" / "dashboard.svg").stat().st_size > 10_000


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_names_a_file_and_a_heading_there(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
        path, anchor = target
        if path.startswith(("http://", "https://")):
            continue
        linked = (page.parent / path) if path else page
        assert linked.exists(), f"{page.name} links to {path}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, f"{page.name} links to #{anchor} in {linked.name}"


def test_the_figures_page_names_the_schema_the_tool_writes():
    from tui.model.statuses import SCHEMA_VERSION

    figures = (ROOT / "docs" / "FIGURES.md").read_text(encoding="utf-8")
    assert f"Schema `{SCHEMA_VERSION}`" in figures
