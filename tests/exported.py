"""Run an exported reproduction script as a user would, and read its RESULT line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.model.config import SdpaConfig
from tui.model.results import RunResult
from tui.present.export import script


def run_exported_script(folder: Path, config: SdpaConfig) -> dict:
    path = folder / "repro.py"
    path.write_text(script(config))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("RESULT "))


def assert_script_agrees(folder: Path, result: RunResult) -> dict:
    """Same seed, same logical inputs, same plan: the script's output error is the engine's and
    its kernel times are close to the engine's. Returns the script's figures for more checks."""
    figures = run_exported_script(folder, result.config)
    assert figures["passed"], figures
    forward = result.forward
    assert figures["max_abs_error"] == pytest.approx(forward.checks[0].cudnn.max_abs, rel=1e-3, abs=1e-6)
    assert 0.8 <= figures["kernel_us"] / forward.timing.median_us <= 1.25, (figures, forward.timing.median_us)
    backward = result.pass_of("backward")
    if backward is not None:
        assert figures["grad_passed"], figures
        assert 0.8 <= figures["backward_kernel_us"] / backward.timing.median_us <= 1.25, figures
    return figures
