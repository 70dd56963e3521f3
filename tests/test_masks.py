"""Sliding window, padding (variable lengths), ALiBi and bias: the reference against hand math."""

import json

import pytest
import torch
from handmath import hand_attention

from tui.engine.graph import define_and_validate
from tui.engine.peer import torch_sdpa
from tui.engine.reference import alibi_slopes, keep_mask, make_inputs, reference_fp32, valid_rows
from tui.engine.tolerances import TOLERANCES, compare
from tui.model.config import SdpaConfig
from tui.model.validation import validate


def tiny(c):
    q, k, v, bias = make_inputs(c, "cpu", seed=5)
    return q.float(), k.float(), v.float(), None if bias is None else bias.float()


@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
def test_sliding_window(causal):
    c = SdpaConfig(b=1, h_q=1, h_kv=1, s_q=5, s_kv=7, d_qk=8, d_v=8, causal=causal, window=2)
    q, k, v, _ = tiny(c)
    align = 2 if causal == "bottom_right" else 0

    def keep(i, j):
        return (causal == "none" or j <= i + align) and j > i + align - 2

    expected = hand_attention(q[0, 0].tolist(), k[0, 0].tolist(), v[0, 0].tolist(), c.scale, keep)
    assert torch.allclose(reference_fp32(c, q, k, v)[0, 0], expected, atol=1e-5)
    mask = keep_mask(c, range(5), "cpu")
    assert mask.sum().item() == c.kept_pairs()


@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
def test_padding_uses_each_batch_entrys_real_lengths(causal):
    c = SdpaConfig(
        b=2, h_q=2, h_kv=1, s_q=6, s_kv=8, d_qk=8, d_v=8, causal=causal, seq_lens_q=(6, 3), seq_lens_kv=(8, 5)
    )
    q, k, v, _ = tiny(c)
    ref = reference_fp32(c, q, k, v)
    for bi in range(2):
        lq, lkv = c.lengths(bi)
        align = lkv - lq if causal == "bottom_right" else 0
        for h in range(2):
            expected = hand_attention(
                q[bi, h, :lq].tolist(),
                k[bi, 0, :lkv].tolist(),
                v[bi, 0, :lkv].tolist(),
                c.scale,
                lambda i, j, a=align: causal == "none" or j <= i + a,
            )
            assert torch.allclose(ref[bi, h, :lq], expected, atol=1e-5)
            assert torch.all(ref[bi, h, lq:] == 0)  # padded rows
    rows = valid_rows(c, "cpu")
    assert rows[:, 0, :, 0].tolist() == [[True] * 6, [True] * 3 + [False] * 3]


def test_padded_rows_are_not_compared():
    c = SdpaConfig(b=1, h_q=1, h_kv=1, s_q=4, s_kv=4, d_qk=8, d_v=8, seq_lens_q=(2,), seq_lens_kv=(4,))
    ref = torch.zeros(c.o_dims)
    out = ref.clone()
    out[0, 0, 3] = 99.0  # garbage in a padded row
    assert compare(out, ref, 5e-3, 3e-3, valid_rows(c, "cpu")).mismatched == 0
    assert compare(out, ref, 5e-3, 3e-3).mismatched == 8


def test_alibi_slopes_follow_the_paper():
    assert alibi_slopes(8) == [2.0**-k for k in range(1, 9)]
    s12 = alibi_slopes(12)
    assert s12[:8] == alibi_slopes(8) and s12[8:] == [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]


def test_alibi_and_bias_are_added_to_the_scores():
    c = SdpaConfig(
        b=2, h_q=2, h_kv=2, s_q=4, s_kv=5, d_qk=8, d_v=8, causal="top_left", alibi=True, bias="bx1"
    )
    q, k, v, bias = tiny(c)
    assert bias.shape == (2, 1, 4, 5)
    ref = reference_fp32(c, q, k, v, bias)
    slopes = alibi_slopes(2)
    for bi in range(2):
        for h in range(2):

            def add(i, j, bi=bi, h=h):
                return float(bias[bi, 0, i, j]) + (j - i) * slopes[h]

            expected = hand_attention(
                q[bi, h].tolist(), k[bi, h].tolist(), v[bi, h].tolist(), c.scale, lambda i, j: j <= i, add
            )
            assert torch.allclose(ref[bi, h], expected, atol=1e-5)


@pytest.mark.parametrize(
    "changes",
    [
        {"window": 3, "causal": "top_left"},
        {"window": 4, "causal": "bottom_right", "s_q": 12},
        {"seq_lens_q": (16, 9), "seq_lens_kv": (16, 5), "causal": "bottom_right"},
        {"alibi": True},
        {"bias": "1xh", "causal": "none"},
    ],
    ids=["window", "window-br", "padding-br", "alibi", "bias"],
)
def test_torch_low_precision_sdpa_matches_the_reference_with_masks(changes):
    c = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=16, s_kv=16, d_qk=16, d_v=16).replace(**changes)
    assert validate(c) == []
    q, k, v, bias = make_inputs(c, "cpu", seed=1)
    ref = reference_fp32(c, q, k, v, bias)
    m = compare(torch_sdpa(c, q, k, v, bias), ref, *TOLERANCES["fp16"], valid_rows(c, "cpu"))
    assert m.mismatched == 0 and m.nonfinite == 0


@pytest.mark.parametrize(
    "changes,params",
    [
        ({"window": 128}, {"diagonal_band_left_bound": 128, "use_causal_mask": True}),
        ({"seq_lens_q": (100, 1024, 7, 512), "seq_lens_kv": (1024,) * 4}, {"use_padding_mask": True}),
        ({"alibi": True}, {"use_alibi_mask": True}),
        ({"bias": "bxh", "causal": "none"}, {}),
    ],
)
def test_the_frontend_accepts_each_option(changes, params):
    g = define_and_validate(SdpaConfig(**changes))
    graph = json.loads(g.json())
    node = graph["nodes"][0]
    for key, value in params.items():
        assert node["params"][key] == value
    if "bias" in changes:
        assert graph["tensors"]["bias"]["dim"] == [4, 12, 1024, 1024]
    if "seq_lens_q" in changes:
        assert graph["tensors"]["seq_len_q"]["dim"] == [4, 1, 1, 1]


def test_dropout_applies_the_drawn_mask_and_rescales():
    c = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=6, s_kv=6, d_qk=8, d_v=8, dropout=0.2)
    q, k, v, _ = tiny(c)
    plain = reference_fp32(c.replace(dropout=0.0), q, k, v)
    ones = torch.ones(1, 2, 6, 6)
    assert torch.allclose(reference_fp32(c, q, k, v, dropout_mask=ones), plain / 0.8, atol=1e-6)
    assert torch.all(reference_fp32(c, q, k, v, dropout_mask=torch.zeros_like(ones)) == 0)
    assert torch.equal(reference_fp32(c, q, k, v), plain)  # no mask given: dropout is off
    graph = json.loads(define_and_validate(c).json())
    assert "seed" in graph["tensors"] and "offset" in graph["tensors"]
    assert validate(SdpaConfig(dropout=1.0))[0].field == "dropout"
