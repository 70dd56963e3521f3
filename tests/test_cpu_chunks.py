"""The CPU check in chunks: its inputs, the fp32 reference and torch's CPU peer are computed a
chunk at a time with a check for a cancel between chunks, each chunk a bounded amount of work,
and the numbers are those of one computation (the same bits, or within fp32 rounding)."""

import math
import multiprocessing

import pytest
import torch
import torch.nn.functional as F

import tui.engine.reference as reference
from tui.engine import cancel
from tui.engine.cancel import Cancelled
from tui.engine.peer import _whole_call, cpu_chunks, forced, torch_sdpa, torch_sdpa_grads
from tui.engine.reference import (
    chunk_steps,
    drawn_values,
    reference_fp32,
    reference_grads,
    softmax_rows,
    valid_rows,
)
from tui.model.config import SdpaConfig
from tui.model.options import RunOptions
from tui.model.results import Environment
from tui.model.statuses import STATUS_CANCELLED, STATUS_CPU_ONLY

BASE = SdpaConfig(b=2, h_q=8, h_kv=2, s_q=48, s_kv=80, d_qk=16, d_v=16, dtype="fp32")
DECODE = SdpaConfig(
    b=16, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"
)


@pytest.mark.parametrize(
    "changes",
    [
        {"causal": "top_left"},
        {"causal": "bottom_right", "s_q": 1},  # a decode step
        {"h_kv": 1, "causal": "none"},  # MQA
        {"causal": "top_left", "window": 9, "alibi": True},
        {"causal": "top_left", "bias": "bxh", "seq_lens_q": (48, 30), "seq_lens_kv": (50, 80)},
        {"causal": "bottom_right", "page_size": 16, "seq_lens_kv": (80, 37)},  # a paged cache
        {"causal": "top_left", "layout": "THD", "seq_lens_q": (20, 48), "seq_lens_kv": (20, 48), "s_kv": 48},
        {"causal": "top_left", "sink": True, "dropout": 0.2},
    ],
    ids=["causal", "decode", "mqa", "window-alibi", "bias-padding", "paged", "thd", "sink-dropout"],
)
def test_the_chunked_grouped_reference_is_the_expanded_one(monkeypatch, changes):
    """GQA computed by the kv head (K and V never repeated), a chunk of a query head's few rows
    at a time, gives what K and V repeated to every query head in one block give: forward, row
    statistics and gradients, within fp32 rounding."""
    c = BASE.replace(**changes)
    values = drawn_values(c.replace(backward=True), "cpu", seed=3)
    q, k, v, bias, d_o = (values.get(n) for n in ("q", "k", "v", "bias", "dO"))
    gen = torch.Generator().manual_seed(4)
    drop = (torch.rand((c.b, c.h_q, c.s_q, c.s_kv), generator=gen) > c.dropout) if c.dropout else None
    sink = torch.randn((1, c.h_q, 1, 1), generator=gen) if c.sink else None

    def everything(config, k, v):
        return (
            reference_fp32(config, q, k, v, bias, drop, sink=sink),
            *softmax_rows(config, q, k, bias, sink),
            *reference_grads(config, q, k, v, d_o, bias, drop, sink=sink),
        )

    group = c.h_q // c.h_kv
    expanded = everything(c.replace(h_kv=c.h_q), k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    dk, dv = (g.unflatten(1, (c.h_kv, group)).sum(2) for g in expanded[4:6])  # a kv head's: its group's
    expanded = (*expanded[:4], dk, dv, *expanded[6:])
    monkeypatch.setattr(reference, "CPU_CHUNK_FLOPS", 2 * c.s_kv * (c.d_qk + c.d_v) * 3.5 * 5)
    if c.s_q > 1:
        assert chunk_steps(c, "cpu", 3.5) == (1, 5)  # autograd: five rows of one query head a chunk
        assert chunk_steps(c, "cpu") == (1, 17)
    else:
        assert chunk_steps(c, "cpu") == (8, 1)  # both kv heads and their query heads a chunk
        assert chunk_steps(c, "cpu", 3.5) == (4, 1)  # autograd: one kv head's
    rows = valid_rows(c, "cpu")
    for got, want in zip(everything(c, k, v), expanded, strict=True):
        if rows is not None and got.shape[2] == c.s_q and got.dim() == 4:
            got, want = got.masked_fill(~rows, 0), want.masked_fill(~rows, 0)  # padded rows: not compared
        assert got.shape == want.shape
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-5, equal_nan=True)


def test_the_decode_reference_within_fp32_rounding_of_the_expanded_one():
    """A decode batch entry's 32 query heads over 8 kv heads at the CPU's own chunks."""
    c = DECODE.replace(b=1, s_kv=512)
    q, k, v = (t.float() for t in (drawn_values(c, "cpu")[n] for n in ("q", "k", "v")))
    mha = c.replace(h_kv=c.h_q)
    want = reference_fp32(mha, q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    assert torch.allclose(reference_fp32(c, q, k, v), want, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("layout", ["BSHD", "BHSD", "SBHD"])
@pytest.mark.parametrize("dims", [(3, 5, 129, 24), (2, 3, 64, 24), (1, 2, 999, 16)], ids=str)
def test_inputs_drawn_in_pieces_are_the_numbers_of_one_draw(monkeypatch, layout, dims):
    """The CPU generator's numbers do not depend on the pieces they are asked in (pieces of
    multiples of 16, the last at least 16), whatever the tensor's layout or size."""
    b, h, s, d = dims
    c = SdpaConfig(b=b, h_q=h, h_kv=h, s_q=s, s_kv=s, d_qk=d, d_v=d, layout=layout, backward=True)
    whole = drawn_values(c, "cpu", seed=7)
    monkeypatch.setattr(reference, "DRAW_CHUNK_ELEMENTS", 40)
    assert reference.draw_pieces(c.q_dims, 40)  # drawn in pieces
    calls = []
    with cancel.checking(lambda: calls.append(1)):
        pieces = drawn_values(c, "cpu", seed=7)
    pieces_of = [len(reference.draw_pieces(t.shape, 40)) for t in whole.values()]
    assert len(calls) == sum(pieces_of) > 4  # a check before each piece
    for name, t in whole.items():
        assert torch.equal(pieces[name], t), name
        assert pieces[name].stride() == t.stride()


def test_every_chunk_is_a_bounded_amount_of_work():
    """What bounds the wait for a cancel: no chunk of the CPU reference or peer holds more than
    CPU_CHUNK_FLOPS (the peer's 1/PEER_WORK times: torch's kernels are faster), unless it is one
    query row; the heads of a chunk read whole kv heads, or one."""
    from tui.engine.peer import PEER_WORK

    configs = [
        DECODE,
        DECODE.replace(h_kv=1),
        SdpaConfig(b=2, h_q=12, h_kv=12, s_q=1024, s_kv=1024, causal="top_left"),
    ]
    configs += [
        SdpaConfig(b=1, h_q=6, h_kv=3, s_q=4096, s_kv=16384, d_qk=128, d_v=128),
        DECODE.replace(h_q=24, h_kv=8),
    ]
    for c in configs:
        group = c.h_q // c.h_kv
        for work in (1.0, 3.5, PEER_WORK, PEER_WORK * 3.5):
            heads, rows = chunk_steps(c, "cpu", work)
            flops = heads * rows * 2 * c.s_kv * (c.d_qk + c.d_v) * work
            assert flops <= reference.CPU_CHUNK_FLOPS or heads == rows == 1, (c.label(), work, heads, rows)
            assert heads % group == 0 or group % heads == 0, (c.label(), heads)
        chunks = list(cpu_chunks(c, None, "FLASH"))
        assert all(h.start // group == (h.stop - 1) // group for _b, h, _r, _c in chunks) or group == 1
        assert sum(len(h) * len(r) for _b, h, r, _c in chunks) == c.b * c.h_q * c.s_q  # each row once


@pytest.mark.parametrize(
    "changes",
    [
        {"causal": "top_left"},
        {"causal": "none"},
        {"causal": "bottom_right", "s_q": 1},
        {"causal": "top_left", "window": 9},
    ],
    ids=["causal", "none", "decode", "window"],
)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_the_chunked_cpu_peer_gives_the_bits_of_one_call(monkeypatch, changes, dtype):
    """torch's CPU SDPA a kv head (K and V expanded, never repeated) and a few rows at a time (a
    causal mask then explicit): each head's rows are computed alike, so the outputs are the bits of
    one call over K and V repeated; the gradients, summed over query heads and rows, within
    rounding."""
    from tui.engine.peer import PEER_WORK

    c = BASE.replace(**{"dtype": dtype, "s_q": 64, "s_kv": 64, "d_qk": 64, "d_v": 64, **changes})
    values = drawn_values(c.replace(backward=True), "cpu", seed=5)
    q, k, v, d_o = (values[n] for n in ("q", "k", "v", "dO"))
    d_o = d_o.to(q.dtype)
    monkeypatch.setattr(reference, "CPU_CHUNK_FLOPS", 16 * 2 * c.s_kv * (c.d_qk + c.d_v) * PEER_WORK * 3.5)
    if c.s_q > 1:
        assert chunk_steps(c, "cpu", PEER_WORK) == (1, 56) and chunk_steps(c, "cpu", PEER_WORK * 3.5) == (
            1,
            16,
        )
    kk, vv = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
    mha = c.replace(h_kv=c.h_q)
    with forced("FLASH"):
        causal = _whole_call(c, None, "FLASH")  # torch's own mask (or none) in one call, else explicit
        if causal is None:
            mask = reference.additive_terms(c, 0, range(c.h_q), range(c.s_q), None, "cpu").unsqueeze(0)
            one = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask.to(q.dtype), scale=c.scale)
        else:
            one = F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, scale=c.scale)
    assert torch.equal(torch_sdpa(c, q, k, v, backend="FLASH"), one)
    for backend in ("FLASH", "MATH"):
        grads = torch_sdpa_grads(c, q, k, v, d_o, backend=backend)
        one_dq, one_dk, one_dv = torch_sdpa_grads(mha, q, kk, vv, d_o, backend=backend)
        wants = (one_dq, one_dk.unflatten(1, (c.h_kv, 4)).sum(2), one_dv.unflatten(1, (c.h_kv, 4)).sum(2))
        for got, want in zip(grads, wants, strict=True):
            assert torch.allclose(got, want, atol=2e-2, rtol=1e-2), backend


def test_a_cancel_stops_a_cpu_check_at_the_next_chunk():
    """The engine process's own inbox: the parent's cancel arrives while the CPU check of a decode
    batch (16 entries, 8192 keys: tens of seconds once, seconds now) is drawing its inputs, in its
    peer or in its reference; the check it makes before the next chunk stops it, answered as
    cancelled, and no chunk runs after it."""
    from tui.engine.runner import Engine
    from tui.process.child import _answer, _Inbox
    from tui.process.protocol import Cancel, RunRequest

    engine = Engine(environment=Environment(gpu_available=False, unavailable_reason="no GPU (test)"))
    config = DECODE.replace(
        b=4
    )  # 1 progress check, 16 pieces of K and V, 32 chunks of the peer, 16 of the reference
    for stop_at in (5, 30, 51):  # drawing K; torch's CPU peer; the reference
        parent, child = multiprocessing.Pipe()
        checks = []

        class Inbox(_Inbox):
            def check(self, request_id, stop_at=stop_at, parent=parent, checks=checks):
                checks.append(1)
                if len(checks) == stop_at:
                    parent.send(Cancel(request_id))  # Esc, as the client sends it
                super().check(request_id)

        class Replies:
            def send(self, msg):
                pass

        result = _answer(engine, RunRequest(1, config, RunOptions()), False, Inbox(child), Replies())
        assert result.status == STATUS_CANCELLED, (stop_at, len(checks), result.message)
        assert result.message.endswith("asked to stop"), result.message
        assert len(checks) == stop_at, len(checks)  # honoured at the first look after it arrived


def test_a_small_cpu_check_in_chunks_still_passes():
    """The whole CPU check of the seed's shape, in chunks, a check between them: a result."""
    from tui.engine.runner import Engine

    engine = Engine(environment=Environment(gpu_available=False, unavailable_reason="no GPU (test)"))
    config = SdpaConfig(b=1, h_q=4, h_kv=2, s_q=256, s_kv=256, causal="top_left")
    calls = []
    with cancel.checking(lambda: calls.append(1)):
        result = engine.run(config, RunOptions())
    assert result.status == STATUS_CPU_ONLY, result.message
    (check,) = result.passes[0].checks
    assert check.peers and all(m.mismatched == 0 for m in check.peers.values()), check
    assert len(calls) >= math.ceil(4 / chunk_steps(config, "cpu")[0])  # a check before every chunk


def test_outside_a_run_nothing_is_checked():
    cancel.between_chunks()  # no run: nothing to stop

    def stop():
        raise Cancelled("asked to stop")

    with cancel.checking(stop), pytest.raises(Cancelled):
        cancel.between_chunks()
    cancel.between_chunks()
