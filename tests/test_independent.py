"""The fp64 cross-check (engine/independent.py), on the CPU: for masks, GQA, padding, a bias with
ALiBi, sinks, score modifiers, dropout and the backward, the fp64 outputs agree with the engine's
fp32 reference within the check's own tolerance; a corrupted output, and a reference that got its
mask wrong, are caught by it; it runs only when asked, and says why where it does not."""

from __future__ import annotations

import pytest

from tui.engine.independent import cross_check, fp64_reference, too_big
from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, Inputs
from tui.engine.reference import drawn_values
from tui.engine.runner import Engine
from tui.model.config import SdpaConfig
from tui.model.options import RunOptions
from tui.model.results import Environment


def shape(**options) -> SdpaConfig:
    return SdpaConfig(
        **{**dict(b=2, h_q=4, h_kv=2, s_q=40, s_kv=56, d_qk=16, d_v=16, causal="none"), **options}
    )


CONFIGS = {
    "top-left-gqa": shape(causal="top_left", h_kv=1),
    "bottom-right-window-padded": shape(
        causal="bottom_right", window=9, seq_lens_q=(40, 7), seq_lens_kv=(56, 20)
    ),
    "bias-alibi-bf16": shape(bias="bxh", alibi=True, dtype="bf16", h_q=6, h_kv=3),
    "sink-stats": shape(sink=True, softmax_out="stats", causal="top_left"),
    "max-sum-exp-padded": shape(softmax_out="max_sum_exp", seq_lens_q=(40, 1), seq_lens_kv=(56, 1)),
    "softcap-causal-window": shape(s_q=48, s_kv=48, variant="softcap-causal:3,20"),
    "documents": shape(s_q=48, s_kv=48, variant="document:16,8,24"),
    "prefix-lm": shape(s_q=48, s_kv=48, variant="prefix-lm:12"),
    "decode-gqa": shape(s_q=1, h_q=8, h_kv=2, causal="bottom_right"),
}
TRAINING = {
    "train-causal-gqa": shape(causal="top_left", backward=True),
    "train-padded-bias": shape(bias="1xh", seq_lens_q=(40, 9), seq_lens_kv=(56, 13), backward=True),
    "train-sink-softcap": shape(s_q=32, s_kv=32, sink=True, variant="softcap:4", backward=True),
    "train-one-key": shape(s_q=1, causal="top_left", dropout=0.2, backward=True),  # the soak's class
}


def inputs_of(config: SdpaConfig) -> Inputs:
    import torch

    drawn = drawn_values(config, "cpu", 3)
    mask = None
    if config.dropout:
        gen = torch.Generator().manual_seed(5)
        shape4 = (config.b, config.h_q, config.s_q, config.s_kv)
        mask = (torch.rand(shape4, generator=gen) > config.dropout).float()
    sink = (
        torch.randn((1, config.h_q, 1, 1), generator=torch.Generator().manual_seed(2))
        if config.sink
        else None
    )
    return Inputs(drawn["q"], drawn["k"], drawn["v"], drawn.get("bias"), drawn.get("dO"), mask, sink)


def crossed(config: SdpaConfig, spec, inputs: Inputs) -> dict:
    """Each output: (fp32 reference, fp64 reference, tolerance, rows)."""
    refs = spec.reference(config, inputs)
    fp64, why = fp64_reference(config, spec.grad, inputs, tuple(refs))
    assert why == "" and fp64.keys() == refs.keys()
    rows = spec.rows(config, "cpu")
    return {n: (ref, fp64[n], spec.tolerance(config, n, ref, inputs), rows[n]) for n, ref in refs.items()}


@pytest.mark.parametrize("name", [*CONFIGS, *TRAINING])
def test_the_fp64_reference_agrees_with_the_fp32_one(name):
    config = {**CONFIGS, **TRAINING}[name]
    inputs = inputs_of(config)
    specs = (FORWARD_PASS, BACKWARD_PASS) if config.backward else (FORWARD_PASS,)
    for spec in specs:
        for output, (ref, ref64, (atol, rtol), rows) in crossed(config, spec, inputs).items():
            mine, theirs = cross_check(ref.half(), ref, ref64, atol, rtol, rows)
            assert theirs.passed and theirs.max_abs <= max(1e-5, 1e-5 * float(ref64.abs().max())), (
                output,
                theirs,
            )
            assert mine.passed, (output, mine)  # fp16's rounding of the reference is within tolerance


def test_a_corrupted_output_and_a_wrong_reference_are_caught_by_fp64():
    import torch

    config = CONFIGS["bottom-right-window-padded"]
    inputs = inputs_of(config)
    (ref, ref64, (atol, rtol), rows) = crossed(config, FORWARD_PASS, inputs)["O"]
    corrupted = ref.clone()
    corrupted[0, 1, 3, :4] += 0.1  # one real row off
    mine, theirs = cross_check(corrupted, ref, ref64, atol, rtol, rows)
    assert not mine.passed and mine.mismatched == 4 and theirs.passed
    poisoned = ref.clone()
    poisoned[1, 0, 2, 0] = float("nan")
    assert cross_check(poisoned, ref, ref64, atol, rtol, rows)[0].nonfinite == 1
    # a reference whose mask was wrong (the window forgotten): the fp64 one says it is the tool's
    wrong = FORWARD_PASS.reference(config.replace(window=None), inputs)["O"]
    assert not cross_check(None, wrong, ref64, atol, rtol, rows)[1].passed
    # and the backward: a gradient with one key's row scaled is off fp64 too
    train = TRAINING["train-causal-gqa"]
    inputs = inputs_of(train)
    ref, ref64, (atol, rtol), rows = crossed(train, BACKWARD_PASS, inputs)["dK"]
    bent = ref.clone()
    bent[0, 1, 5] *= 1.5
    assert not cross_check(bent, ref, ref64, atol, rtol, rows)[0].passed
    assert torch.isfinite(ref64).all()


def test_the_check_runs_only_when_asked_and_says_so():
    engine = Engine(environment=Environment(gpu_available=False, unavailable_reason="a CPU test"))
    config = shape(b=1, backward=True, causal="top_left")
    plain = engine.run(config, RunOptions())
    crossed_run = engine.run(config, RunOptions(cross_check=True))
    for p in plain.passes:
        assert all(c.reference_fp64 is None and c.fp64 is None for c in p.checks)
        assert not any("fp64" in n for n in p.notes)
    for p in crossed_run.passes:
        assert p.checks and all(c.reference_fp64 is not None and c.reference_fp64.passed for c in p.checks)
        assert all(c.fp64 is None for c in p.checks)  # cuDNN did not run here
        assert any("cross-checked against fp64" in n for n in p.notes)
    big = SdpaConfig(b=8, h_q=32, h_kv=8, s_q=4096, s_kv=4096, d_qk=128, d_v=128)
    assert "above the" in too_big(big, False, "cpu") and too_big(big, False, "cuda") == ""


def test_the_soaks_one_query_dropout_backward_is_o_rounding_within_the_floor_the_fp32_units_missed():
    """b=32 h=1 s_q=1 s_kv=1722 d=128 fp16 causal dropout 0.07 (docs/BENCHMARKS.md), smaller: one
    key kept, so the true dQ and dK are zero, and cuDNN's are D's residue from O as stored in fp16,
    O = V / (1 - p) not being representable. The floor from O's rounding holds that residue; the
    fp32-units floor alone (the atol the soak saw) did not."""
    import torch

    config = SdpaConfig(b=32, h_q=1, h_kv=1, s_q=1, s_kv=128, d_qk=128, d_v=128, dropout=0.07, backward=True)
    drawn = drawn_values(config, "cpu", 1)
    q, k, v, d_o = (drawn[n].float() for n in ("q", "k", "v", "dO"))
    exact = v[:, :, :1] / (1 - config.dropout)  # the one key kept, and not dropped
    stored = exact.half().float()
    residue = config.scale * ((d_o * (exact - stored)).sum(-1, keepdim=True) * q)  # dK of key 0, as cuDNN's
    assert float(residue.abs().max()) > 1e-5
    zero = torch.zeros_like(k)
    old, _ = BACKWARD_PASS.tolerance(config, "dK", zero, Inputs(q, k, v, None, d_o))
    new, _ = BACKWARD_PASS.tolerance(config, "dK", zero, Inputs(q, k, v, None, d_o, o=stored))
    assert old < float(residue.abs().max()) <= new
    assert new < 0.05  # still a check: a wrong dK of this size fails
