"""The reference is checked against arithmetic done by hand, so the check itself is trusted."""

import pytest
import torch
from handmath import hand_attention

from tui.engine.reference import keep_mask, make_inputs, reference_fp32
from tui.engine.tolerances import TOLERANCES, compare
from tui.model.config import SdpaConfig


@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
def test_reference_matches_hand_computation(causal):
    c = SdpaConfig(b=1, h_q=1, h_kv=1, s_q=3, s_kv=4, d_qk=2, d_v=3, causal=causal, attn_scale=0.5)
    q = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])
    k = torch.tensor([[[[1.0, 2.0], [0.5, -1.0], [0.0, 0.0], [2.0, 1.0]]]])
    v = torch.tensor([[[[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [3.0, 3.0, 3.0], [-1.0, 0.0, 1.0]]]])
    off = c.causal_offset

    def keep(i, j):
        return off is None or j <= i + off

    expected = hand_attention(q[0, 0].tolist(), k[0, 0].tolist(), v[0, 0].tolist(), 0.5, keep)
    got = reference_fp32(c, q, k, v)
    assert torch.allclose(got[0, 0], expected, atol=1e-6)


def test_gqa_query_heads_share_kv_heads_in_groups():
    c = SdpaConfig(b=1, h_q=4, h_kv=2, s_q=5, s_kv=6, d_qk=8, d_v=8, causal="none", dtype="fp16")
    q, k, v = (t.float() for t in make_inputs(c, "cpu", seed=3)[:3])
    got = reference_fp32(c, q, k, v)
    for hq in range(4):
        hk = hq // 2  # query heads 0,1 -> kv head 0; 2,3 -> kv head 1
        p = torch.softmax(q[0, hq] @ k[0, hk].T * c.scale, dim=-1)
        assert torch.allclose(got[0, hq], p @ v[0, hk], atol=1e-5)


def test_layout_does_not_change_the_reference():
    base = SdpaConfig(b=2, h_q=2, h_kv=2, s_q=7, s_kv=7, d_qk=8, d_v=8)
    outs = []
    for layout in ("BSHD", "BHSD", "SBHD"):
        c = base.replace(layout=layout)
        q, k, v, _ = make_inputs(c, "cpu", seed=1)
        outs.append(reference_fp32(c, q, k, v))
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])


def test_the_seeds_permute_compares_attention_over_heads():
    """Fact 1: permuting logical (b,h,s,d) tensors makes torch attend over heads; our check must
    see that as a mismatch, not a pass."""
    c = SdpaConfig(b=1, h_q=4, h_kv=4, s_q=8, s_kv=8, d_qk=8, d_v=8, causal="none")
    q, k, v, _ = make_inputs(c, "cpu", seed=0)
    ref = reference_fp32(c, q, k, v)
    wrong = torch.nn.functional.scaled_dot_product_attention(
        *(t.float().permute(0, 2, 1, 3) for t in (q, k, v)), scale=c.scale
    ).permute(0, 2, 1, 3)
    assert compare(wrong, ref, *TOLERANCES["fp16"]).mismatched > 0
    right = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=c.scale)
    assert compare(right, ref, *TOLERANCES["fp16"]).mismatched == 0


def test_reference_chunks_rows_without_changing_the_result(monkeypatch):
    import tui.engine.reference as reference

    c = SdpaConfig(b=1, h_q=2, h_kv=1, s_q=64, s_kv=64, d_qk=8, d_v=8, causal="top_left")
    q, k, v, _ = make_inputs(c, "cpu", seed=2)
    whole = reference_fp32(c, q, k, v)
    monkeypatch.setattr(reference, "REFERENCE_CHUNK_BYTES", 64 * 4 * 5)  # 5 rows at a time
    assert reference.block_steps(c) == (1, 5)
    assert torch.allclose(reference_fp32(c, q, k, v), whole, atol=1e-6)


def test_keep_mask_alignment():
    c = SdpaConfig(s_q=2, s_kv=4, causal="bottom_right")
    assert keep_mask(c, range(2), "cpu").tolist() == [[True, True, True, False], [True, True, True, True]]
    c = c.replace(causal="top_left")
    assert keep_mask(c, range(2), "cpu").tolist() == [[True, False, False, False], [True, True, False, False]]
    assert keep_mask(c.replace(causal="none"), range(2), "cpu") is None


def test_compare_metrics_on_known_values():
    ref = torch.tensor([1.0, -2.0, 0.001, 4.0])
    out = torch.tensor([1.004, -2.0, 0.0, float("nan")])
    m = compare(out, ref, atol=5e-3, rtol=3e-3)
    assert m.nonfinite == 1
    assert m.max_abs == float("inf")  # a NaN can never pass
    assert m.mismatched == 1  # only the NaN; 0.004 <= 0.005 + 0.003
    assert m.max_rel == float("inf")
    assert m.mean_abs == pytest.approx((0.004 + 0.001) / 4, rel=1e-4)  # over finite outputs
    finite = compare(out[:3], ref[:3], atol=5e-3, rtol=3e-3)
    assert finite.max_rel == pytest.approx(0.004, rel=1e-4)  # |ref| = 0.001 < atol is not counted
    assert (finite.mismatched, finite.nonfinite) == (0, 0)
    ok = compare(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), 5e-3, 3e-3)
    assert (ok.max_abs, ok.mismatched, ok.nonfinite) == (0.0, 0, 0)


def test_an_exactly_zero_gradient_gets_an_atol_floor_from_the_inputs_not_from_its_own_max():
    """A backward over one key (s_kv=1): softmax over one score is 1, so dQ and dK are exactly 0.
    On the H200 cuDNN's dQ came out as fp32 residue (2.8e-7, 9.8e-7), and an atol of 3e-32 from
    max |reference| failed a correct result; the floor passes it and still fails a wrong one."""
    import torch

    from tui.engine.tolerances import atol_floor, compare, tolerance

    config = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=1, d_qk=64, d_v=64, backward=True)
    gen = torch.Generator().manual_seed(0)
    q, k, v, d_o = (
        torch.randn(dims, generator=gen)
        for dims in (config.q_dims, config.k_dims, config.v_dims, config.o_dims)
    )
    zero = torch.zeros(config.q_dims)
    floor = atol_floor(config, "dQ", q, k, v, d_o)
    assert 1e-6 < floor < 1e-3  # above fp32 residue, far below an ordinary gradient's atol
    assert tolerance(config, zero, grad=True)[0] < 1e-29  # the share-of-max rule alone
    atol, rtol = tolerance(config, zero, grad=True, floor=floor)
    assert atol == floor
    residue = torch.full(config.q_dims, 9.8e-7)
    assert compare(residue, zero, atol, rtol).mismatched == 0
    assert compare(residue, zero, *tolerance(config, zero, grad=True)).mismatched == residue.numel()
    assert compare(torch.full(config.q_dims, 1e-2), zero, atol, rtol).mismatched == residue.numel()
    ordinary = torch.randn(config.q_dims, generator=gen)  # a gradient of ordinary size
    assert tolerance(config, ordinary, grad=True, floor=floor) == tolerance(config, ordinary, grad=True)
    assert atol_floor(config, "O", q, k, v) == pytest.approx(16 * 2**-23 * float(v.abs().max()))


def test_a_keys_gradient_sums_the_stored_o_residue_of_every_row_of_its_group():
    """The hunt's seed-2 backward mismatch (H200): one key, five query heads a key head, three
    queries, fp16, dropout 0.11, scores shifted by -1000. The true dK is 0; cuDNN's is the residue
    of D = rowsum(dO * O) read off O as stored, summed over the 15 rows that read the key. Simulated
    in fp64 here: one row's bound (dQ's) is exceeded by some draws, the group's never."""
    import torch

    from tui.engine.tolerances import atol_floor, stored_o_floor

    config = SdpaConfig(b=1, h_q=5, h_kv=1, s_q=3, s_kv=1, d_qk=8, d_v=8, dtype="fp16", causal="none",
                        dropout=0.11, backward=True)  # fmt: skip
    beyond_a_row = 0
    for seed in range(200):
        gen = torch.Generator().manual_seed(seed)
        q = torch.randn(config.q_dims, generator=gen, dtype=torch.float64)
        q[..., 0] += 53.0  # shift:-1000: the component q and k share
        v = torch.randn(config.v_dims, generator=gen, dtype=torch.float64)
        d_o = torch.randn(config.o_dims, generator=gen, dtype=torch.float64)
        o = (v / (1 - config.dropout)).expand(config.o_dims)  # one key kept: O = V / (1 - p)
        stored = o.half().double()
        d_s = (d_o * (o - stored)).sum(-1)  # each row's dS = dP - D: D's rounding alone
        d_k = config.scale * (d_s.unsqueeze(-1) * q).sum((1, 2))  # over the group's heads and rows
        error = d_k.abs().max().item()
        q32, d_o32, o32 = q.float(), d_o.float(), stored.float()
        beyond_a_row += error > stored_o_floor(config, q32, d_o32, o32)
        k = torch.zeros(config.k_dims)
        assert error <= atol_floor(config, "dK", q32, k, v.float(), d_o32, o32), seed
    assert beyond_a_row > 0  # what the floor of one row let through as a mismatch


def test_the_cpu_mode_checks_a_one_key_backward_as_passing(cpu_engine):
    config = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=1, d_qk=64, d_v=64, backward=True, causal="none")
    b = cpu_engine.run(config).pass_of("backward")
    assert b is not None and [c.output for c in b.checks] == ["dQ", "dK", "dV"]
    for c in b.checks:
        ((peer, metrics),) = c.peers.items()
        assert metrics.mismatched == 0, (c.output, peer, metrics, c.atol)
        assert c.atol > 1e-7  # the floor, not 1e-32


def test_a_reference_that_is_not_finite_is_a_mismatch_never_a_pass():
    """NaN in a reference (a mask read from memory nothing wrote) once compared as no error at all."""
    import torch

    from tui.engine.tolerances import compare

    out, ref = torch.ones(4, 4), torch.ones(4, 4)
    ref[1, 2] = float("nan")
    e = compare(out, ref, 1e-3, 1e-3)
    assert e.mismatched == 1 and not e.passed and e.nonfinite == 0
    assert compare(out, torch.ones(4, 4), 1e-3, 1e-3).passed


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_as_a_scalar_are_those_of_the_given_output_gradient_to_the_bit(dtype):
    from tui.engine.reference import vjp

    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 4, 48, 32, generator=gen).to(dtype).requires_grad_() for _ in range(3))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    d_o = torch.randn(o.shape, generator=gen).to(dtype) * 1e4  # large: a sum that overflows changes nothing
    given = torch.autograd.grad(o, (q, k, v), d_o, retain_graph=True)
    assert all(torch.equal(a, b) for a, b in zip(given, vjp(torch, o, (q, k, v), d_o), strict=True))


def test_the_backward_reference_leaves_sympy_unimported():
    """Autograd's check of a given output gradient imports torch.fx's symbolic shapes and sympy:
    2.3 s of each engine process that checks a backward pass on the H200 (no bytecode there)."""
    import subprocess
    import sys

    code = (
        "import sys, torch; from tui.model.config import SdpaConfig; "
        "from tui.engine.reference import make_inputs, reference_grads; "
        "c = SdpaConfig(b=1, h_q=2, h_kv=1, s_q=16, s_kv=16, d_qk=8, d_v=8, backward=True); "
        "q, k, v, _ = (t.float() if t is not None else t for t in make_inputs(c, 'cpu')); "
        "reference_grads(c, q, k, v, torch.randn(c.o_dims)); "
        "print('sympy' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False"]


@pytest.mark.parametrize(
    ("config", "rows", "keys"),
    [
        (SdpaConfig(s_q=64, s_kv=64, causal="top_left"), range(10, 15), range(0, 15)),
        (SdpaConfig(s_q=4, s_kv=8, causal="bottom_right"), range(0, 2), range(0, 6)),
        (SdpaConfig(s_q=64, s_kv=64, causal="top_left", window=3), range(10, 15), range(8, 15)),
        (SdpaConfig(b=2, s_q=64, s_kv=64, causal="none", seq_lens_kv=(40, 64)), range(10, 15), range(0, 40)),
        (SdpaConfig(s_q=64, s_kv=64, causal="none"), range(10, 15), range(0, 64)),
        # no row of the block attends any key: all of them, so the rows still read as empty
        (
            SdpaConfig(b=2, s_q=64, s_kv=64, causal="top_left", window=3, seq_lens_kv=(10, 64)),
            range(60, 64),
            range(64),
        ),
    ],
)
def test_a_blocks_key_span_holds_every_key_one_of_its_rows_keeps(config, rows, keys):
    from tui.engine.reference import key_span

    assert key_span(config, 0, rows) == keys
    keep = keep_mask(config, rows, "cpu", 0)
    if keep is not None:  # nothing kept outside the span
        inside = torch.zeros(config.s_kv, dtype=torch.bool)
        inside[keys.start : keys.stop] = True
        assert not keep[:, ~inside].any()


@pytest.mark.parametrize(
    "changes",
    [
        {"causal": "top_left"},
        {"causal": "bottom_right", "s_q": 40},
        {"causal": "top_left", "window": 9, "alibi": True},
        {"causal": "top_left", "bias": "bxh", "seq_lens_q": (64, 30), "seq_lens_kv": (50, 64)},
        {"causal": "top_left", "sink": True, "dropout": 0.2},
    ],
)
def test_row_blocks_that_skip_masked_keys_give_the_whole_blocks_reference(monkeypatch, changes):
    # forward, row statistics and gradients alike: the skipped keys are exp(-inf) = 0 columns
    import tui.engine.reference as reference
    from tui.engine.reference import reference_grads, softmax_rows

    c = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=64, s_kv=64, d_qk=8, d_v=8, dtype="fp32").replace(**changes)
    q, k, v, bias = make_inputs(c, "cpu", seed=3)
    gen = torch.Generator().manual_seed(4)
    d_o = torch.randn(c.o_dims, generator=gen)
    drop = (torch.rand((c.b, c.h_q, c.s_q, c.s_kv), generator=gen) > c.dropout) if c.dropout else None
    sink = torch.randn((1, c.h_q, 1, 1), generator=gen) if c.sink else None

    def everything():
        return (
            reference_fp32(c, q, k, v, bias, drop, sink=sink),
            *softmax_rows(c, q, k, bias, sink),
            *reference_grads(c, q, k, v, d_o, bias, drop, sink=sink),
        )

    whole = everything()
    monkeypatch.setattr(reference, "REFERENCE_CHUNK_BYTES", c.s_kv * 4 * 7)  # 7 rows, one head a block
    assert reference.block_steps(c) == (1, 7)
    for got, want in zip(everything(), whole, strict=True):
        rows = reference.valid_rows(c, "cpu")
        if rows is not None and got.shape[2] == c.s_q and got.dim() == 4:
            got, want = got.masked_fill(~rows, 0), want.masked_fill(~rows, 0)  # padded rows: not compared
        assert torch.allclose(got, want, atol=1e-5, equal_nan=True)
