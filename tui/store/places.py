"""Where the tool keeps its own files: the data folder (history, known issues, hunts) and the plan
cache's folder, each movable by an environment variable (tests use folders of their own)."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "SDPA_EXPLORER_DATA_DIR"  # overrides the user data folder
CACHE_DIR_ENV = "SDPA_EXPLORER_CACHE_DIR"  # where the plan cache lives instead of the user cache folder
HISTORY_FILE = "history.sqlite3"


def data_dir() -> Path:
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    from platformdirs import user_data_dir

    return Path(user_data_dir("sdpa-explorer", appauthor=False))


def history_path() -> Path:
    return data_dir() / HISTORY_FILE


def plan_cache_folder() -> Path:
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("sdpa-explorer")) / "plans"
