"""The hunt on the GPU: its runs cross-checked in fp64 through the real engine process; a short
`hunt` that ends within its budget and bundles each finding; each bundle's script reproducing its
finding in a fresh process from the bundle alone; a crash's candidates each in a fresh process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tui.cli.main import main
from tui.jobs.hunt import hunt_options
from tui.jobs.hunt_shrink import PASS, outcome_of
from tui.model.config import SdpaConfig
from tui.process.session import EngineSession

pytestmark = pytest.mark.gpu

BUDGET_S = 60


def test_a_hunt_run_is_cross_checked_in_fp64_with_peers_beside_it():
    config = SdpaConfig(
        b=1, h_q=4, h_kv=2, s_q=192, s_kv=192, d_qk=64, d_v=64, causal="top_left", backward=True
    )
    with EngineSession() as session:
        assert session.ready() is not None
        r = session.run(config, hunt_options(1, peers=True))
    assert outcome_of(r).kind == PASS, r.message
    for p in r.passes:
        for c in p.checks:
            assert c.fp64 is not None and c.reference_fp64 is not None, (p.kind, c.output)
            assert c.reference_fp64.passed, (p.kind, c.output, c.reference_fp64)
    assert any(c.peers for c in r.forward.checks)  # a peer beside cuDNN, for whose bug it is


def test_a_crash_candidate_runs_in_a_fresh_engine_process():
    config = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64)
    with EngineSession() as session:
        assert session.ready() is not None
        first = session.client.pid
        assert session.run(config, hunt_options(1, fresh=True)).status == "ok"
        assert session.run(config, hunt_options(1)).status == "ok"
        assert session.client.pid != first and session.restarts == 0


def test_a_short_hunt_ends_in_its_budget_and_each_bundle_reproduces_its_finding(tmp_path):
    started = time.monotonic()
    r = CliRunner().invoke(main, ["hunt", "--budget", f"{BUDGET_S}s", "--seed", "1", "--out", str(tmp_path)])
    wall = time.monotonic() - started
    print(r.output)
    assert r.exit_code in (0, 1), r.output
    assert wall <= BUDGET_S + 30, (
        wall
    )  # the budget bounds the hunt (the engine's start and the bundles beside)
    assert re.search(r"hunt seed 1: \d+ configurations", r.output)
    for bundle in sorted(tmp_path.iterdir()):
        assert {p.name for p in bundle.iterdir()} >= {"repro.py", "config.json", "result.json", "report.md",
                                                     "environment.json", "finding.json"}  # fmt: skip
        finding = json.loads((bundle / "finding.json").read_text())
        if not finding["confirmed"] or finding["failure"] not in ("mismatch", "non-finite output", "crash"):
            continue  # a cut-short shrink, or a repeat the script does not check
        ran = subprocess.run(
            [sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=600
        )
        said = (bundle.name, finding["whose"], ran.stdout[-2000:], ran.stderr[-2000:])
        assert ran.returncode != 0, said  # it fails in a fresh process, from the bundle alone
