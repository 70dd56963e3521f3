"""A benchmark's figures, written as JSON where its --out option says (nothing without one)."""

from __future__ import annotations

import json
from typing import Any


def save(figures: Any, path: str | None) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=1)
