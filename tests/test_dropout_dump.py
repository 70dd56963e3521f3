"""A dropout mask cuDNN dumps that is not the one its kernel applied (one query on Hopper, cuDNN
9.19: three quarters of the positions unwritten) is told by its count of ones, and the outputs
that depend on it are then left unchecked, not failed: the reference would apply the wrong mask."""

from __future__ import annotations

import types

import pytest
import torch

from tui.engine import forms
from tui.engine.measure import Bench, Measurement, _check_chosen, mask_shortfall
from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, BuiltPass
from tui.model import known_issues
from tui.model.config import SdpaConfig
from tui.model.options import RunOptions
from tui.model.results import Environment

# the soak's one-query dropout forward, as the H200 ran it (benchmarks/dropout_probe.py)
SOAK = SdpaConfig(b=1, h_q=32, h_kv=4, s_q=1, s_kv=512, d_qk=184, d_v=224, dtype="bf16", layout="SBHD",
                  causal="none", dropout=0.26)  # fmt: skip
POSITIONS = 32 * 512
PADDED = SdpaConfig(
    b=2, h_q=2, h_kv=2, s_q=3, s_kv=5, d_qk=8, d_v=8, dropout=0.5, seq_lens_q=(3, 1), seq_lens_kv=(5, 2)
)


def short(config: SdpaConfig, ones: float) -> str:
    """mask_shortfall as the forward's check asks it: its kept positions from its FLOPs."""
    return mask_shortfall(config.dropout, config.flops() // (2 * (config.d_qk + config.d_v)), ones)


def test_the_h200s_one_query_mask_is_short_and_its_two_query_mask_is_not():
    words = short(SOAK, 0.184 * POSITIONS)  # what engine 1 dumped at s_q=1
    assert "keeps 18.4% of the 16,384 kept positions where p=0.26 keeps 74%" in words
    assert "not checked" in words
    two = SOAK.replace(s_q=2)
    assert short(two, 0.738 * 2 * POSITIONS) == ""  # engine 2 at s_q=2: a full mask
    assert short(SOAK.replace(dropout=0.01, h_q=4, h_kv=4), 0.249 * 4 * 512) != ""
    assert short(SOAK.replace(dropout=0.0), 0.0) == ""  # no dropout: no mask to judge


@pytest.mark.parametrize(
    "config",
    [
        SOAK,
        SOAK.replace(s_q=64, causal="top_left"),  # only the kept positions count
        PADDED,
        SdpaConfig(b=1, h_q=1, h_kv=1, s_q=1, s_kv=1, d_qk=8, d_v=8, dropout=0.9),
    ],
    ids=["soak", "causal", "padded", "one-position"],
)
def test_a_faithful_mask_drawn_at_random_is_never_called_short(config):
    """Bernoulli draws over exactly the positions the masks keep, the way a full dump holds them."""
    positions = config.h_q * config.kept_pairs()
    for seed in range(20):
        gen = torch.Generator().manual_seed(seed)
        ones = (torch.rand(positions, generator=gen) >= config.dropout).sum().item()
        assert short(config, float(ones)) == "", (seed, ones, positions)


def _built(config: SdpaConfig, kind: str = "forward", ones: float | None = None) -> BuiltPass:
    built = BuiltPass(kind, types.SimpleNamespace(config=config, chosen=0), {}, None)
    built.reference, built.tolerances = {"O": torch.zeros(1)}, {"O": (1e-3, 1e-3)}  # made once, before
    built.mask_ones = ones
    return built


def test_no_output_is_checked_against_a_short_mask_and_the_pass_says_why():
    bench = Bench(handle=None, set_stream=lambda s: None, l2_bytes=None, progress=lambda s: None)
    options = RunOptions(autotune=False)
    words = short(SOAK, 0.184 * POSITIONS)
    what = {"flops": SOAK.flops()}
    forward = _built(SOAK, ones=0.184 * POSITIONS)  # the count the forward's dump left
    assert _check_chosen(Measurement(FORWARD_PASS, forward, {}, bench), options, what) == ()
    assert forward.mask_shortfall == words and forward.check_notes == (words,)
    assert _check_chosen(Measurement(FORWARD_PASS, forward, {}, bench), options, what) == ()
    assert forward.check_notes == (words,)  # said once, however often it is checked
    backward = _built(SOAK.replace(backward=True), "backward")
    back = {"flops": SOAK.backward_flops()}
    assert (
        _check_chosen(Measurement(BACKWARD_PASS, backward, {"forward": forward}, bench), options, back) == ()
    )
    assert backward.check_notes == (words,)  # the backward reads the same mask
    assert forms._checked(forward, {"O": torch.zeros(1)}, bench) == []  # nor its equivalent forms


def test_the_one_query_dump_is_a_known_wrong_result_of_cudnn_9_19_on_hopper():
    key = "dropout-mask-dump-one-query-hopper-cudnn-9.19"

    def met(config, version="9.19.0", cc="9.0"):
        env = Environment(gpu_available=True, cudnn_backend_version=version, compute_capability=cc)
        return key in [i.key for i in known_issues.matching(config, env)]

    assert met(SOAK) and met(SOAK.replace(layout="BSHD", d_qk=128, d_v=128))
    assert not met(SOAK.replace(s_q=2)) and not met(SOAK.replace(dropout=0.0))
    assert not met(SOAK, "9.20.0") and not met(SOAK, cc="10.0")
    issue = next(i for i in known_issues.KNOWN_ISSUES if i.key == key)
    assert issue.outcome == known_issues.WRONG_RESULT


def test_the_check_line_says_an_unchecked_pass_is_not_checked_not_a_nan_error():
    import dataclasses
    from pathlib import Path

    from tui.jobs.check import case_line
    from tui.model.results import RunResult

    seed = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())
    assert "max abs err " in case_line("seed", seed) and "not checked" not in case_line("seed", seed)
    forward = dataclasses.replace(
        seed.passes[0], checks=(), reference=""
    )  # a mask it could not check against
    line = case_line("seed", dataclasses.replace(seed, passes=(forward,)))
    assert line.startswith("[green]PASS") and "not checked  plan" in line and "nan" not in line
