"""Inference as served: a paged KV cache, packed (THD) tokens, sink tokens and the softmax's row
outputs, on the CPU: storage read back as the logical tensors it holds, the graph's tensors and
keywords, and the reference's sink and row statistics against the formulas written out."""

import json
import math

import pytest
import torch

from tui.engine import storage
from tui.engine.graph import GraphBuildError, define_and_validate
from tui.engine.keywords import OP_KEYWORDS, SDPA_KEYWORDS, sdpa_kwargs
from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, Inputs
from tui.engine.reference import make_inputs, reference_fp32, reference_grads, softmax_rows
from tui.engine.tensors import backward_tensors, device_tensors
from tui.model.config import SdpaConfig
from tui.model.tensor_plan import tensor_plan

PAGED = SdpaConfig(b=3, h_q=4, h_kv=2, s_q=1, s_kv=300, d_qk=16, d_v=16, causal="bottom_right", page_size=64)
PACKED = SdpaConfig(
    b=3,
    h_q=4,
    h_kv=2,
    s_q=40,
    s_kv=50,
    d_qk=16,
    d_v=8,
    layout="THD",
    seq_lens_q=(40, 7, 1),
    seq_lens_kv=(50, 9, 3),
)


def test_a_page_table_holds_only_the_pages_real_lengths_need_each_once():
    config = PAGED.replace(seq_lens_q=(1, 1, 1), seq_lens_kv=(300, 64, 65))
    table = storage.page_table(config, seed=3)
    assert [len(row) for row in table] == [5, 5, 5]  # ceil(300 / 64) slots per sequence
    needed = storage.pages_needed(config)
    assert needed == [5, 1, 2]
    held = [p for row, n in zip(table, needed, strict=True) for p in row[:n]]
    assert sorted(held) == list(range(8))  # every pool page belongs to one sequence, once
    assert held != sorted(held)  # shuffled, as an allocator leaves them
    assert storage.page_table(config.replace(page_order="ordered"))[0] == [0, 1, 2, 3, 4]
    assert storage.page_table(config, seed=3) == table  # seeded


@pytest.mark.parametrize("order", ["shuffled", "ordered"])
def test_pages_gathered_through_the_table_are_the_keys_paged(order):
    config = PAGED.replace(page_order=order, seq_lens_q=(1, 1, 1), seq_lens_kv=(300, 17, 128))
    dense = torch.randn(config.k_dims)
    table = torch.tensor(storage.page_table(config, seed=1), dtype=torch.int32)
    pool = storage.to_pages(torch, config, dense, table)
    assert tuple(pool.shape) == storage.pool_shape(config, config.d_qk) == (5 + 1 + 2, 2, 64, 16)
    back = storage.gather(torch, config, pool, table.view(config.b, 1, -1, 1))
    for i, n in enumerate((300, 17, 128)):  # the real keys; past them the cache holds nothing
        assert torch.equal(back[i, :, :n], dense[i, :, :n])


def test_a_wrong_page_table_reads_other_keys():
    config = PAGED
    dense = torch.randn(config.k_dims)
    table = torch.tensor(storage.page_table(config, seed=1), dtype=torch.int32)
    pool = storage.to_pages(torch, config, dense, table)
    swapped = table.flip(0)  # the sequences' tables exchanged
    assert not torch.equal(storage.gather(torch, config, pool, swapped), dense)


@pytest.mark.parametrize("name", ["q", "k", "v", "o"])
def test_packed_tokens_unpack_to_the_real_rows(name):
    config = PACKED
    dims = storage.logical_dims(config, name)
    dense = torch.randn(dims).transpose(1, 2).contiguous().transpose(1, 2)  # BSHD memory, as THD allocates
    packed = storage.pack(torch, config, dense, name)
    side = storage.RAGGED_SIDE[name]
    assert packed.shape[0] == config.real_tokens(side) and packed.is_contiguous()
    back = storage.unpack(torch, config, packed, name, dims)
    for i in range(config.b):
        n = config.lengths(i)[side]
        assert torch.equal(back[i, :, :n], dense[i, :, :n]) and not back[i, :, n:].any()


def test_ragged_offsets_are_elements_to_each_sequences_first_token():
    assert storage.ragged_offsets(PACKED, "q", 4, 16) == [0, 40 * 64, 47 * 64, 48 * 64]
    assert storage.ragged_offsets(PACKED, "dV", 2, 8) == [0, 50 * 16, 59 * 16, 62 * 16]


def test_device_tensors_store_pages_and_packed_tokens_and_read_back_logical():
    for config in (PAGED, PACKED.replace(backward=True)):
        data = device_tensors(config, "cpu", seed=5)
        q, k, v, _ = make_inputs(config, "cpu", seed=5)
        for name, want in (("q", q), ("k", k), ("v", v)):
            got = storage.logical(config, data, name)
            side = 0 if name == "q" else 1
            for i in range(config.b):
                n = config.lengths(i)[side]
                assert torch.equal(got[i, :, :n], want[i, :, :n]), (config.label(), name)
    data = device_tensors(PAGED, "cpu", seed=5)
    assert (
        data["paged_attention_k_table"].shape == (3, 1, 5, 1)
        and data["paged_attention_k_table"].dtype == torch.int32
    )
    bwd = backward_tensors(
        PACKED.replace(backward=True), device_tensors(PACKED.replace(backward=True), "cpu", 5), "cpu", 5
    )
    assert bwd["dQ"].shape == (48, 4, 16) and bwd["dO_offsets"].view(-1).tolist() == [
        0,
        40 * 32,
        47 * 32,
        48 * 32,
    ]


PACKED_PAGED = PACKED.replace(page_size=16)  # packed queries over a paged cache: prefill into pages


def test_packed_queries_over_a_paged_cache_pack_q_and_o_and_keep_k_and_v_pools():
    """With THD and pages, K and V are pools found through their tables (no ragged offsets), Q and
    O packed tokens; each reads back as the logical numbers drawn."""
    data = device_tensors(PACKED_PAGED, "cpu", seed=5)
    q, k, v, _ = make_inputs(PACKED_PAGED, "cpu", seed=5)
    assert tuple(data["k"].shape) == storage.pool_shape(PACKED_PAGED, 16) and "k_offsets" not in data
    assert data["q"].shape == (48, 4, 16) and "q_offsets" in data
    for name, want in (("q", q), ("k", k), ("v", v)):
        got, side = storage.logical(PACKED_PAGED, data, name), 0 if name == "q" else 1
        for i in range(PACKED_PAGED.b):
            n = PACKED_PAGED.lengths(i)[side]
            assert torch.equal(got[i, :, :n], want[i, :, :n]), name
    g = define_and_validate(PACKED_PAGED)
    assert g.tensors["q"].ragged_offset is not None and g.tensors["o"].ragged_offset is not None
    assert g.tensors["k"].ragged_offset is None and g.tensors["v"].ragged_offset is None
    inputs = Inputs(*(storage.logical(PACKED_PAGED, data, n) for n in ("q", "k", "v")))
    ref = FORWARD_PASS.reference(PACKED_PAGED, inputs, lambda share: None)
    assert torch.isfinite(ref["O"]).all() and ref["O"].shape == (3, 4, 40, 8)


def test_the_graphs_read_pools_tables_and_offsets():
    g = define_and_validate(PAGED)
    node = json.loads(g.json())["nodes"][0]
    assert {"paged_attention_k_table", "paged_attention_v_table"} <= set(g.tensors)
    assert tuple(g.tensors["k"].get_dim()) == storage.pool_shape(PAGED, 16)
    assert node["params"]["paged_attention_max_seq_len_kv"] == 300 and node["params"]["use_padding_mask"]
    g = define_and_validate(PACKED)
    assert all(g.tensors[n].ragged_offset is not None for n in ("q", "k", "v", "o"))
    g = define_and_validate(PACKED.replace(backward=True), backward=True)
    assert all(g.tensors[n].ragged_offset is not None for n in ("dO", "dQ", "dK", "dV"))
    g = define_and_validate(SdpaConfig(sink=True, backward=True), backward=True)
    assert {"sink_token", "dSink_token"} <= set(g.tensors)
    g = define_and_validate(SdpaConfig(softmax_out="max_sum_exp"))
    assert {"score_max", "score_sum_exp"} <= set(g.tensors) and "stats" not in g.tensors
    assert "stats" in define_and_validate(SdpaConfig(softmax_out="stats")).tensors


def test_the_backward_has_no_page_tables_and_says_so():
    with pytest.raises(GraphBuildError, match="sdpa_backward has no option for a paged KV cache") as info:
        define_and_validate(PAGED.replace(s_q=64, backward=True), backward=True)
    assert info.value.unsupported


def test_the_new_keywords_are_in_the_sets_the_binding_is_checked_against():
    assert {"paged_attention_k_table", "sink_token", "score_max", "score_sum_exp"} <= SDPA_KEYWORDS
    assert {"dSink_token", "max_total_seq_len_q"} <= OP_KEYWORDS["sdpa_backward"]
    train = PACKED.replace(backward=True)
    kw = sdpa_kwargs(train, None, "sdpa_backward", tensor_plan(train, backward=True).tokens)
    assert kw["max_total_seq_len_q"] == 48 and kw["max_total_seq_len_kv"] == 62
    assert sdpa_kwargs(SdpaConfig(softmax_out="stats"))["generate_stats"] is True


def _with_sink(q, k, v, sink, scale):
    """softmax over [scores, sink] without its last column, written out for one small case."""
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    column = sink.view(1, -1, 1, 1).expand(*s.shape[:3], 1)
    p = torch.softmax(torch.cat([s, column], -1), -1)[..., :-1]
    return torch.einsum("bhqk,bhkd->bhqd", p, v), torch.logsumexp(
        torch.cat([s, column], -1), -1, keepdim=True
    )


def test_the_sink_joins_every_softmax_row_and_has_a_gradient():
    config = SdpaConfig(
        b=2, h_q=3, h_kv=3, s_q=5, s_kv=7, d_qk=8, d_v=8, causal="none", sink=True, dtype="fp16"
    )
    q, k, v = (
        torch.randn(d, dtype=torch.float64).float() for d in (config.q_dims, config.k_dims, config.v_dims)
    )
    sink = torch.randn(1, 3, 1, 1)
    want, lse = _with_sink(q, k, v, sink, config.scale)
    got = reference_fp32(config, q, k, v, sink=sink)
    assert torch.allclose(got, want, atol=1e-6)
    assert not torch.allclose(got, reference_fp32(config, q, k, v), atol=1e-3)  # the sink matters
    top, total = softmax_rows(config, q, k, sink=sink)
    assert torch.allclose(top + total.log(), lse, atol=1e-5)
    d_o = torch.randn(config.o_dims)
    leaf = sink.clone().requires_grad_()
    o, _ = _with_sink(q, k, v, leaf, config.scale)
    (expected,) = torch.autograd.grad(o, leaf, d_o)
    *_, dsink = reference_grads(config, q, k, v, d_o, sink=sink)
    assert torch.allclose(dsink, expected, atol=1e-5)


def test_row_outputs_of_the_forward_are_checked_beside_o():
    config = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=4, s_kv=4, d_qk=8, d_v=8, softmax_out="max_sum_exp")
    assert FORWARD_PASS.output_keys(config) == {"O": "o", "Max": "score_max", "SumExp": "score_sum_exp"}
    assert FORWARD_PASS.output_keys(config.replace(softmax_out="stats"))["Stats"] == "stats"
    assert BACKWARD_PASS.output_keys(config.replace(sink=True, backward=True))["dSink"] == "dSink_token"
    q, k = torch.randn(config.q_dims), torch.randn(config.k_dims)
    top, total = softmax_rows(config, q, k)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * config.scale
    s = s.masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf"))  # causal, top-left
    assert torch.allclose(top, s.amax(-1, keepdim=True))
    assert torch.allclose(total, (s - s.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True))


def test_paged_and_packed_count_the_bytes_they_hold():
    decode = PAGED.replace(seq_lens_q=(1, 1, 1), seq_lens_kv=(300, 17, 128))
    per_token = 2 * 16 * 2 * 2  # h_kv, d_qk + d_v, fp16
    assert decode.kv_bytes_read() == (5 + 1 + 2) * 64 * per_token + 2 * 3 * 5 * 4
    dense = decode.replace(page_size=None)
    assert (
        decode.io_bytes() - decode.kv_bytes_read() == dense.io_bytes() - dense.kv_bytes_read()
    )  # Q and O alike
    train = PACKED.replace(layout="BSHD", backward=True)
    assert (
        train.backward_io_bytes() == 2 * (120 * 4 * 16 + 150 * 2 * 24) * 2 + 2 * 120 * 4 * 8 * 2 + 120 * 4 * 4
    )
    packed = PACKED.replace(backward=True)
    assert packed.backward_io_bytes() < train.backward_io_bytes()  # real tokens only
    assert packed.io_bytes() < PACKED.replace(layout="BSHD").io_bytes()
    packed, padded = storage.packing_saves(PACKED)
    assert packed < padded and padded == 3 * (40 * 4 * (16 + 8) * 2 + 50 * 2 * 24 * 2)
    assert math.isclose(packed / padded, (48 * 4 * 24 + 62 * 2 * 24) / (120 * 4 * 24 + 150 * 2 * 24))
