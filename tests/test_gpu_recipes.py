"""On the H200: input recipes through cuDNN (the fill where no output may read, large and shifted
scores, padded strides), each cross-checked in fp64 and reproduced by its script; the fp64
cross-check of every output; and the soak's two one-query dropout mismatches accounted for."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig
from tui.present.export import script

pytestmark = pytest.mark.gpu

GQA = dict(h_q=8, h_kv=2, d_qk=128, d_v=128, dtype="bf16")
RECIPES = {
    "dense-padded-nan": SdpaConfig(b=3, s_q=512, s_kv=512, seq_lens_q=(512, 300, 77), seq_lens_kv=(512, 300, 77),
                                   inputs="seed:11,pad:nan", **GQA),
    "paged-decode-nan": SdpaConfig(b=4, s_q=1, s_kv=1024, causal="bottom_right", page_size=64, seq_lens_q=(1,) * 4,
                                   seq_lens_kv=(1024, 70, 513, 1), inputs="seed:12,pad:nan", **GQA),
    "thd-train-nan": SdpaConfig(b=3, s_q=256, s_kv=256, layout="THD", backward=True, seq_lens_q=(256, 64, 191),
                                seq_lens_kv=(256, 64, 191), inputs="seed:13,pad:nan", **GQA),
    "very-negative-lse-train": SdpaConfig(b=2, s_q=320, s_kv=320, backward=True, inputs="seed:14,shift:-1000", **GQA),
    "large-scores": SdpaConfig(b=2, s_q=256, s_kv=256, softmax_out="stats", inputs="seed:15,scale:100", **GQA),
    "near-equal-train": SdpaConfig(b=2, s_q=256, s_kv=256, backward=True, inputs="seed:16,near-equal", **GQA),
    "padded-strides-nan": SdpaConfig(b=2, s_q=256, s_kv=256, layout="BHSD", seq_lens_q=(256, 100),
                                     seq_lens_kv=(256, 100), inputs="seed:17,pad:nan,strides:padded", **GQA),
}  # fmt: skip
# docs/BENCHMARKS.md's soak: the two mismatches it left unexplained, both dropout with one query
SOAK = {
    "one-query-dropout-backward": SdpaConfig(b=32, h_q=1, h_kv=1, s_q=1, s_kv=1722, d_qk=128, d_v=128,
                                             dropout=0.07, backward=True, deterministic=True),
    "one-query-dropout-forward": SdpaConfig(b=1, h_q=32, h_kv=4, s_q=1, s_kv=512, d_qk=184, d_v=224, dtype="bf16",
                                            layout="SBHD", causal="none", dropout=0.26),
    # the hunt's seed-2 finding: one key read by 15 query rows (5 heads a key head, 3 queries)
    "one-key-group-dropout-backward": SdpaConfig(b=1, h_q=5, h_kv=1, s_q=3, s_kv=1, d_qk=8, d_v=8, causal="none",
                                                 dropout=0.11, backward=True, inputs="seed:800797041,shift:-1000"),
}  # fmt: skip


@pytest.fixture(scope="module")
def engine():
    return Engine(cache_size=4)


def script_figures(tmp_path, config: SdpaConfig) -> dict:
    path = tmp_path / "repro.py"
    path.write_text(script(config))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("RESULT "))


def same_error(a: float, b: float) -> bool:
    return (math.isinf(a) and math.isinf(b)) or a == pytest.approx(b, rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("name", list(RECIPES))
def test_a_recipe_runs_its_check_is_the_tools_and_its_script_says_the_same(engine, tmp_path, name):
    """Whatever cuDNN makes of the fill (ok, or a mismatch: a finding), the tool's fp32 reference
    agrees with the fp64 one on every output, and the script alone gives the same verdict and
    errors."""
    r = engine.run(RECIPES[name], RunOptions(autotune=False, cross_check=True))
    assert r.status in ("ok", "mismatch"), r.message
    figures = script_figures(tmp_path, r.config)
    for p in r.passes:
        for c in p.checks:
            assert c.reference_fp64 is not None and c.reference_fp64.passed, (
                p.kind,
                c.output,
                c.reference_fp64,
            )
            assert c.fp64 is not None and c.fp64.passed == c.cudnn.passed, (p.kind, c.output, c.fp64, c.cudnn)
            theirs = figures["checks"][c.output]
            assert theirs["passed"] == c.passed and same_error(theirs["max_abs"], c.cudnn.max_abs), (
                c.output,
                theirs,
            )


def test_every_output_is_cross_checked_in_fp64_when_asked_and_only_then(engine):
    config = SdpaConfig(b=2, h_q=16, h_kv=4, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16", backward=True,
                        softmax_out="stats")  # fmt: skip
    plain = engine.run(config, RunOptions(autotune=False))
    assert all(c.fp64 is None and c.reference_fp64 is None for p in plain.passes for c in p.checks)
    crossed = engine.run(config, RunOptions(autotune=False, cross_check=True))
    assert crossed.status == "ok", crossed.message
    outputs = {c.output for p in crossed.passes for c in p.checks}
    assert outputs >= {"O", "Stats", "dQ", "dK", "dV"}
    for p in crossed.passes:
        assert any("cross-checked against fp64" in n for n in p.notes)
        for c in p.checks:
            assert c.fp64.passed and c.reference_fp64.passed, (c.output, c.fp64, c.reference_fp64)
            assert c.reference_fp64.max_abs < c.atol / 10  # fp32 is far closer to fp64 than the tolerance


@pytest.mark.parametrize("name", list(SOAK))
def test_the_soaks_one_query_dropout_mismatches_are_accounted_for(engine, name):
    """The backward's dK was O's rounding (true gradient zero, one key kept): within the stored-O
    floor now, checked against fp64 too; with a group of query heads, summed over all its rows. The forward's O was checked against a mask cuDNN's graph
    dumped with three quarters of it unwritten (benchmarks/dropout_probe.py): now left unchecked,
    said, and marked as the known issue."""
    r = engine.run(SOAK[name], RunOptions(autotune=False, cross_check=True))
    notes = [n for p in r.passes for n in p.notes]
    assert r.status == "ok", (r.message, notes)
    if name.endswith("backward"):
        checks = [c for p in r.passes for c in p.checks]
        assert checks and all(c.passed and c.reference_fp64.passed for c in checks), notes
    else:
        assert r.passes[0].checks == () and any("the mask cuDNN's graph dumped keeps" in n for n in notes)
        assert "dropout-mask-dump-one-query-hopper-cudnn-9.19" in [i.key for i in r.known_issues]
