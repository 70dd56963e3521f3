"""Run an exported reproduction script as a user would, and read its RESULT line and graph JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.model.config import SdpaConfig
from tui.model.results import RunResult
from tui.present.export import script


def run_exported_script(folder: Path, config: SdpaConfig) -> tuple[dict, dict]:
    """The script's figures (its RESULT line) and the graphs it gave cuDNN, by pass."""
    path, graphs = folder / "repro.py", folder / "graph.json"
    path.write_text(script(config))
    proc = subprocess.run(
        [sys.executable, str(path), str(graphs)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    return figures, json.loads(graphs.read_text())


def same_graph(a: str, b: str) -> bool:
    """Two graphs' JSON alike but for `gid`, the frontend's count of the graphs its process made."""
    x, y = json.loads(a), json.loads(b)
    x.pop("gid", None), y.pop("gid", None)
    return x == y


def assert_script_agrees(folder: Path, result: RunResult, error_abs: float = 1e-5) -> dict:
    """Same seed, same logical inputs, same plan: the script declares the engine's graphs, its error
    of each output the engine checked is the engine's (to `error_abs`), and its kernel times are
    close to the engine's (the script's CUDA-graph replay includes the gaps between kernels).
    Returns the script's figures for more checks."""
    figures, graphs = run_exported_script(folder, result.config)
    assert figures["passed"], figures
    for p in result.passes:
        assert same_graph(graphs[p.kind], p.graph_json), f"the {p.kind} graph differs"
        for check in p.checks:
            theirs = figures["checks"][check.output]
            assert theirs["max_abs"] == pytest.approx(check.cudnn.max_abs, abs=error_abs), check.output
            assert theirs["atol"] == pytest.approx(check.atol, rel=1e-4), check.output
    forward = result.forward
    assert 0.8 <= figures["kernel_us"] / forward.timing.median_us <= 1.25, (figures, forward.timing.median_us)
    backward = result.pass_of("backward")
    if backward is not None:
        assert 0.8 <= figures["backward_kernel_us"] / backward.timing.median_us <= 1.25, figures
        if result.config.deterministic:
            assert figures["repeatable"] and backward.repeatable
    return figures
