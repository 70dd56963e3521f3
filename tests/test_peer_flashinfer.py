"""FlashInfer at any batch, on the CPU against a fake `flashinfer` that follows its documented call
sequence (tests/flashinfer_fake.py): the wrapper each configuration gets, the page table turned
into indptr / indices / last_page_len, what plan() is told, plan time kept out of kernel time, a
wrong output flagged, the refusals and the missing-package row."""

from __future__ import annotations

import types

import flashinfer_fake
import pytest

from tui.engine import peer_flashinfer, peer_runs, storage
from tui.engine.peer_base import Tensors
from tui.engine.peer_flashinfer import FlashInfer, paged_kv
from tui.engine.reference import reference_fp32, valid_rows
from tui.engine.runner import RunOptions
from tui.engine.tensors import device_tensors
from tui.model.config import SdpaConfig
from tui.model.results import TimingStats

BASE = SdpaConfig(b=4, h_q=4, h_kv=4, s_q=24, s_kv=24, d_qk=16, d_v=16, dtype="fp32", causal="none")
CASES = {
    "batch 1, causal": BASE.replace(b=1, causal="top_left"),
    "batch 4, causal": BASE.replace(causal="top_left"),
    "bottom-right, unequal": BASE.replace(causal="bottom_right", s_q=10),
    "mixed real lengths": BASE.replace(
        causal="bottom_right", seq_lens_q=(24, 7, 1, 13), seq_lens_kv=(24, 20, 5, 13)
    ),
    "GQA": BASE.replace(h_q=8, h_kv=2, causal="top_left"),
    "window": BASE.replace(causal="bottom_right", window=5),
    "window, no causal": BASE.replace(window=6),
    "ALiBi, scale": BASE.replace(alibi=True, causal="top_left", attn_scale=0.3),
    "d_v apart": BASE.replace(d_v=8, causal="top_left"),
    "BHSD": BASE.replace(layout="BHSD", causal="top_left"),
    "THD": BASE.replace(
        layout="THD", causal="bottom_right", seq_lens_q=(24, 3, 9, 17), seq_lens_kv=(24, 8, 9, 20)
    ),
    "paged prefill": BASE.replace(page_size=5, causal="bottom_right", s_q=9, seq_lens_kv=(24, 11, 5, 16)),
    "paged prefill, d_v apart": BASE.replace(
        page_size=6, d_v=8, causal="bottom_right", seq_lens_kv=(24, 1, 7, 12)
    ),
    "paged prefill, GQA, window": BASE.replace(page_size=8, h_kv=1, causal="bottom_right", window=7),
    "paged decode": BASE.replace(
        page_size=4, s_q=1, h_q=8, h_kv=2, causal="bottom_right", seq_lens_kv=(24, 1, 9, 17)
    ),
    "paged decode, window": BASE.replace(page_size=3, s_q=1, causal="bottom_right", window=4),
    "dense decode": BASE.replace(s_q=1, h_q=8, h_kv=2, causal="bottom_right"),
    "softcap": BASE.replace(variant="softcap:0.5", attn_scale=1.0),
    "softcap, causal, window": BASE.replace(variant="softcap-causal:0.5,6", attn_scale=1.0),
    "softcap decode": BASE.replace(variant="softcap:0.5", attn_scale=1.0, s_q=1, s_kv=40),
    "dense decode, pages of its memory": BASE.replace(
        s_q=1, s_kv=48, causal="bottom_right", seq_lens_kv=(48, 17, 1, 32)
    ),
    "dense decode, BHSD": BASE.replace(s_q=1, layout="BHSD", seq_lens_kv=(24, 3, 11, 1)),
}
WRAPPERS = {
    "paged prefill": "BatchPrefillWithPagedKVCacheWrapper",
    "paged prefill, d_v apart": "BatchPrefillWithPagedKVCacheWrapper",
    "paged prefill, GQA, window": "BatchPrefillWithPagedKVCacheWrapper",
    "paged decode": "BatchDecodeWithPagedKVCacheWrapper",
    "paged decode, window": "BatchDecodeWithPagedKVCacheWrapper",
    "dense decode": "BatchDecodeWithPagedKVCacheWrapper",
    "softcap decode": "BatchDecodeWithPagedKVCacheWrapper",
    "dense decode, pages of its memory": "BatchDecodeWithPagedKVCacheWrapper",
    "dense decode, BHSD": "BatchDecodeWithPagedKVCacheWrapper",
}


def engine_tensors(config: SdpaConfig) -> Tensors:
    """What peer_runs hands a peer: the logical tensors, and the pass's own stored ones."""
    data = device_tensors(config, "cpu", seed=3)
    q, k, v = (storage.logical(config, data, name) for name in ("q", "k", "v"))
    return Tensors(q, k, v, data.get("bias"), stored=data)


def error(config: SdpaConfig, out, t: Tensors) -> float:
    ref = reference_fp32(config, t.q, t.k, t.v, t.bias)
    assert out.shape == ref.shape == config.o_dims
    rows = valid_rows(config, "cpu")
    if rows is not None:
        out, ref = out * rows, ref * rows
    return float((out.float() - ref).abs().max())


@pytest.fixture
def fake(monkeypatch):
    fi = flashinfer_fake.module()
    monkeypatch.setattr(peer_flashinfer, "_module", lambda name: fi)
    return fi


def run(config: SdpaConfig, adapter: FlashInfer | None = None):
    adapter = adapter or FlashInfer()
    t = engine_tensors(config)
    assert adapter.refusal(config) == ""
    prepared = adapter.prepare(config, t)
    return prepared, prepared.logical(prepared.run()), t


@pytest.mark.parametrize("case", CASES)
def test_each_configuration_computes_the_references_attention(fake, case):
    config = CASES[case]
    _, out, t = run(config)
    assert error(config, out, t) < 1e-5
    ((wrapper, init),) = flashinfer_fake.events(fake, "init")
    assert wrapper == WRAPPERS.get(case, "BatchPrefillWithRaggedKVCacheWrapper")
    assert init["workspace"].numel() == peer_flashinfer.WORKSPACE_BYTES


def test_the_page_table_becomes_indptr_indices_and_last_page_len_by_hand():
    config = SdpaConfig(
        b=3, h_q=2, h_kv=2, s_q=1, s_kv=10, page_size=4, seq_lens_kv=(10, 5, 1), page_order="ordered"
    )
    table = storage.page_table(config)
    assert table == [[0, 1, 2], [3, 4, 4], [5, 5, 5]]  # past a sequence's pages, its last repeated
    kv = paged_kv(config, table, 4)
    assert kv.indptr == [0, 3, 5, 6]  # 10 tokens in 3 pages of 4, 5 in 2, 1 in 1
    assert kv.indices == [0, 1, 2, 3, 4, 5]
    assert kv.last_page_len == [2, 1, 1]  # 10 - 8, 5 - 4, 1
    shuffled = paged_kv(config, [[2, 3, 5], [0, 4, 4], [1, 1, 1]], 4)
    assert shuffled.indices == [2, 3, 5, 0, 4, 1] and shuffled.indptr == [0, 3, 5, 6]


def test_plan_is_told_the_engines_pages_and_the_configuration(fake):
    config = CASES["paged prefill, GQA, window"].replace(alibi=True, attn_scale=0.25)
    t = engine_tensors(config)
    FlashInfer().prepare(config, t)
    ((_, init),) = flashinfer_fake.events(fake, "init")
    ((_, plan),) = flashinfer_fake.events(fake, "plan")
    assert init["kv_layout"] == "HND"  # the engine's pools are (pages, h_kv, page size, d)
    table = t.stored["paged_attention_k_table"].view(config.b, -1).tolist()
    assert plan["indices"].tolist() == [p for row in table for p in row[:3]]  # 24 tokens: 3 pages of 8
    assert plan["kv_indptr"].tolist() == [0, 3, 6, 9, 12] and plan["last_page_len"].tolist() == [8] * 4
    assert plan["qo_indptr"].tolist() == [0, 24, 48, 72, 96]
    assert (plan["num_qo_heads"], plan["num_kv_heads"], plan["head_dim"], plan["page_size"]) == (4, 1, 16, 8)
    assert plan["causal"] is True and plan["window_left"] == 6 and plan["pos_encoding_mode"] == "ALIBI"
    assert plan["sm_scale"] == 0.25
    assert not flashinfer_fake.events(fake, "run")  # preparing plans; only the timed call runs


def test_the_same_pages_cuDNN_reads_are_handed_to_run(fake):
    config = CASES["paged decode"]
    prepared, _, t = run(config)
    ((_, ran),) = flashinfer_fake.events(fake, "run")
    k, v = ran["paged_kv_cache"]
    assert k.data_ptr() == t.stored["k"].data_ptr() and v.data_ptr() == t.stored["v"].data_ptr()
    assert "Decode" in prepared.description and "HND pages of 4" in prepared.description


def test_a_softcap_is_told_as_logits_soft_cap_with_its_causal_mask_and_window(fake):
    run(CASES["softcap, causal, window"])
    run(CASES["softcap decode"])
    (_, prefill), (_, decode) = flashinfer_fake.events(fake, "plan")
    assert prefill["logits_soft_cap"] == 0.5 and prefill["causal"] is True and prefill["window_left"] == 5
    assert decode["logits_soft_cap"] == 0.5 and decode["window_left"] == -1


def test_decode_runs_on_tensor_cores_past_four_query_heads_a_kv_head(fake):
    run(CASES["paged decode"])  # 8 query heads on 2: CUDA cores
    run(CASES["dense decode"].replace(h_q=16))  # 16 on 2
    first, second = (init for _, init in flashinfer_fake.events(fake, "init"))
    assert "use_tensor_cores" not in first and second["use_tensor_cores"] is True


def test_a_dense_decode_reads_its_bshd_memory_as_pages_of_16(fake):
    config = CASES["dense decode, pages of its memory"]
    prepared, _, t = run(config)
    ((_, plan),) = flashinfer_fake.events(fake, "plan")
    ((_, ran),) = flashinfer_fake.events(fake, "run")
    assert (
        ran["paged_kv_cache"][0].data_ptr() == t.k.data_ptr()
        and "a view of BSHD memory" in prepared.description
    )
    assert plan["page_size"] == 16 and plan["kv_indptr"].tolist() == [0, 3, 5, 6, 8]  # 48, 17, 1, 32 tokens
    assert plan["indices"].tolist() == [0, 1, 2, 3, 4, 6, 9, 10] and plan["last_page_len"].tolist() == [
        16,
        1,
        1,
        16,
    ]


def test_fp8_pages_are_read_dequantised_page_for_page(fake):
    """FP8 runs in fp16 on the dequantised values, as every peer does: the engine's own E4M3 pools
    dequantised in place of each page, through the same table."""
    from tui.engine import fp8

    config = SdpaConfig(b=3, h_q=4, h_kv=2, s_q=1, s_kv=40, d_qk=16, d_v=16, dtype="fp8_e4m3", page_size=8,
                        causal="bottom_right", seq_lens_kv=(40, 9, 23))  # fmt: skip
    data = device_tensors(config, "cpu", seed=3)
    q, k, v = (storage.logical(config, data, name).half() for name in ("q", "k", "v"))
    prepared = FlashInfer().prepare(config, Tensors(q, k, v, stored=data))
    out = prepared.logical(prepared.run())
    ((_, ran),) = flashinfer_fake.events(fake, "run")
    pool = ran["paged_kv_cache"][0]
    assert data["k"].dtype.itemsize == 1 and pool.dtype == q.dtype
    assert pool.shape == data["k"].shape and (pool == fp8.values(config, data, "k").half()).all()
    assert error(config, out, Tensors(q.float(), k.float(), v.float())) < 1e-3


def test_one_workspace_for_every_plan(fake):
    adapter = FlashInfer()
    run(CASES["batch 4, causal"], adapter)
    run(CASES["paged decode"], adapter)
    first, second = (init["workspace"] for _, init in flashinfer_fake.events(fake, "init"))
    assert first is second


def timed(us: float) -> TimingStats:
    return TimingStats(us, us, us, us, us, 0.0, 20, 10, False, regime="burst")


def measured(fake, config: SdpaConfig, monkeypatch, keys=("flashinfer",)):
    """peer_runs.measure_peers on the CPU, its GPU steps scripted: one waited run, then a timing
    that calls the peer five times."""
    from tui.engine import faults
    from tui.engine.passes import FORWARD_PASS, Inputs

    t = engine_tensors(config)
    ref = reference_fp32(config, t.q, t.k, t.v)
    built = types.SimpleNamespace(reference={"O": ref}, tolerances={"O": (1e-4, 1e-4)}, data=t.stored)
    m = types.SimpleNamespace(
        config=config,
        spec=FORWARD_PASS,
        built=built,
        bench=types.SimpleNamespace(progress=lambda _t: None, l2_bytes=None, gpu=None),
        inputs=lambda: Inputs(t.q, t.k, t.v),
    )

    def kernel_time(run, *_a, **_k):
        for _ in range(5):
            run()
        return timed(50.0)

    monkeypatch.setattr(faults, "execute_once", lambda run, _during, _plan="": run())
    monkeypatch.setattr(peer_runs, "kernel_time", kernel_time)
    return peer_runs.measure_peers(m, keys, RunOptions(), 10**9, 10**6)


def test_plan_time_is_kept_out_of_kernel_time(fake, monkeypatch):
    (result,), errors = measured(fake, CASES["paged prefill"], monkeypatch)
    assert result.ran and errors["O"][result.name].passed, result.reason
    assert len(flashinfer_fake.events(fake, "plan")) == 1  # planned once, before any timing
    assert len(flashinfer_fake.events(fake, "run")) == 1 + 5  # the checked run, then the timed ones
    assert result.compile_seconds is not None and result.compile_seconds > 0
    assert "plan()" in result.description and result.timing.median_us == 50.0


def test_a_misread_page_table_is_flagged_fail(monkeypatch):
    fi = flashinfer_fake.module(wrong=True)  # reads each request's pages in pool order
    monkeypatch.setattr(peer_flashinfer, "_module", lambda name: fi)
    (result,), errors = measured(fi, CASES["paged prefill"], monkeypatch)  # pages shuffled, as served
    assert result.ran and not errors["O"][result.name].passed


def test_a_plan_flashinfer_refuses_is_one_line_in_its_words(fake, monkeypatch):
    def refuse(*_a, **_k):
        raise ValueError("Unsupported head_dim_qk: 16\nsupported: 64, 128, 256")

    monkeypatch.setattr(flashinfer_fake.BatchPrefillWithRaggedKVCacheWrapper, "plan", refuse)
    (result,), _ = measured(fake, CASES["batch 1, causal"], monkeypatch)
    assert not result.ran and result.reason == "Unsupported head_dim_qk: 16"


def test_the_fake_keeps_flashinfers_call_order_and_checks():
    import torch

    fi = flashinfer_fake.module()
    ws = torch.zeros(16, dtype=torch.uint8)
    wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "HND")
    q, pool = torch.zeros(4, 2, 8), torch.zeros(3, 2, 4, 8)
    with pytest.raises(RuntimeError, match="plan"):
        wrapper.run(q, (pool, pool))
    ints = lambda *x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    with pytest.raises(ValueError, match="last_page_len"):
        wrapper.plan(ints(0, 4), ints(0, 1), ints(0), ints(5), 2, 2, 8, 4, q_data_type=torch.float32)
    wrapper.plan(ints(0, 3), ints(0, 1), ints(0), ints(4), 2, 2, 8, 4, q_data_type=torch.float32)
    with pytest.raises(ValueError, match="qo_indptr"):
        wrapper.run(q, (pool, pool))  # 4 query tokens, a plan of 3
    with pytest.raises(KeyError):
        fi.BatchDecodeWithPagedKVCacheWrapper(ws, "BSHD")


def test_fields_without_an_equivalent_are_named_in_one_line():
    fi = FlashInfer()
    words = {
        "bias": fi.refusal(BASE.replace(bias="1xh")),
        "top-left": fi.refusal(BASE.replace(causal="top_left", s_q=8)),
        "window": fi.refusal(BASE.replace(window=4, seq_lens_q=(24, 3, 24, 24))),
        "dropout": fi.refusal(BASE.replace(dropout=0.1)),
        "sink": fi.refusal(BASE.replace(sink=True)),
        "variant": fi.refusal(BASE.replace(variant="prefix-lm:8")),
        "softcap-causal": fi.refusal(BASE.replace(variant="softcap-causal:30", s_q=8)),
        "backward": fi.refusal(BASE.replace(backward=True), "backward"),
    }
    assert words["bias"].startswith("bias:")
    assert words["top-left"].startswith("causal top-left over unequal lengths")
    assert words["window"].startswith("window without a causal mask")
    assert words["dropout"].startswith("dropout:") and "no backward" in words["backward"]
    assert words["sink"].startswith("sink tokens:") and words["variant"].startswith("variant prefix-lm:")
    assert words["softcap-causal"].startswith("variant softcap-causal over unequal lengths")
    assert all("\n" not in w for w in words.values())
    assert (
        fi.refusal(BASE.replace(causal="top_left", seq_lens_q=(24, 5, 24, 24), seq_lens_kv=(24, 5, 24, 24)))
        == ""
    )


def test_without_flashinfer_the_row_says_how_to_get_it(monkeypatch):
    def missing(name):
        raise ImportError(name)

    monkeypatch.setattr(peer_flashinfer, "_module", missing)
    assert FlashInfer().unavailable() == "flashinfer is not installed: pip install flashinfer-python"
    (result,), errors = measured(None, CASES["batch 1, causal"], monkeypatch)
    assert not result.ran and "pip install flashinfer-python" in result.reason and not errors
