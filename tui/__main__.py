import gc
import os
import sys
from pathlib import Path

gc.disable()  # as the installed command does (tui/entry.py): on again when a command starts

from .model.launch import LAUNCHER_ENV  # noqa: E402

# a command the tool suggests starts it as this one was started
os.environ.setdefault(
    LAUNCHER_ENV, "uv run python -m tui" if os.environ.get("UV") else f"{Path(sys.executable).name} -m tui"
)

from .cli.main import main  # noqa: E402

main()
