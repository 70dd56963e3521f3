"""Run an exported reproduction script as a user would, and read its RESULT line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tui.engine.config import SdpaConfig
from tui.export import script


def run_exported_script(folder: Path, config: SdpaConfig) -> dict:
    path = folder / "repro.py"
    path.write_text(script(config))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
