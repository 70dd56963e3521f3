"""How the user starts this tool, so that a command it suggests (explain's nearest configurations)
runs when pasted: `uv run sdpa-explorer` under uv, `python3 -m tui` where that started it."""

from __future__ import annotations

import os
import shlex

LAUNCHER_ENV = "SDPA_EXPLORER_LAUNCHER"  # set by `python -m tui`; engine processes inherit it


def launcher() -> list[str]:
    named = os.environ.get(LAUNCHER_ENV, "").strip()
    if named:
        return shlex.split(named)
    return ["uv", "run", "sdpa-explorer"] if os.environ.get("UV") else ["sdpa-explorer"]
