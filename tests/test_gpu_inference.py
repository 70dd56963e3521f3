"""Inference as served, on the H200: a paged KV cache, packed tokens, sink tokens and the softmax's
row outputs each build, match the fp32 reference and are timed, or are refused in cuDNN's words."""

import pytest

from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig
from tui.store.presets import find

pytestmark = pytest.mark.gpu

GQA = dict(h_q=32, h_kv=8, d_qk=128, d_v=128, dtype="bf16")
DECODE = SdpaConfig(b=4, s_q=1, s_kv=4096, causal="bottom_right", page_size=64, **GQA)


@pytest.fixture(scope="module")
def engine():
    return Engine(cache_size=8)


def passed(r):
    assert r.status == "ok", r.message
    assert all(c.passed for p in r.passes for c in p.checks), [c for p in r.passes for c in p.checks]
    assert r.forward.timing is not None and r.forward.timing.median_us > 0
    return r


@pytest.mark.parametrize(
    "preset", ["llama3-8b-paged-decode-p16", "llama3-8b-paged-decode-p64", "llama3-8b-chunked-prefill",
               "packed-thd-training", "gpt-oss-sinks"],
)  # fmt: skip
def test_each_inference_preset_builds_matches_and_is_timed(engine, preset):
    r = passed(engine.run(find(preset).config, RunOptions(autotune=False)))
    assert {c.output for c in r.forward.checks} >= {"O"}
    if r.config.backward:
        assert {c.output for c in r.pass_of("backward").checks} >= {"dQ", "dK", "dV"}


@pytest.mark.parametrize(
    "changes",
    [
        dict(page_order="ordered"),
        dict(seq_lens_q=(1, 1, 1, 1), seq_lens_kv=(4096, 3000, 17, 1024)),  # pages held for real lengths only
        dict(page_size=16, s_q=64, seq_lens_q=(64, 5, 64, 1), seq_lens_kv=(4096, 100, 640, 64)),
    ],
    ids=["ordered", "ragged-decode", "chunks-of-16"],
)
def test_a_paged_cache_in_any_order_and_lengths_matches(engine, changes):
    passed(engine.run(DECODE.replace(**changes), RunOptions(autotune=False)))


def test_a_wrong_page_table_would_fail_the_check(engine):
    """The reference was drawn through the table the graph was given: exchanging the sequences'
    tables under the graph afterwards makes its O disagree with that reference."""
    config = DECODE.replace(b=2, s_kv=1024)
    passed(engine.run(config, RunOptions(autotune=False)))
    m = engine._measurement(config, "forward")
    table = m.built.data["paged_attention_k_table"]
    assert m.built.data["paged_attention_v_table"] is table  # K and V share one table, as served
    table.copy_(table.flip(0).clone())
    (o,) = m.check(m.outputs_of(m.built.graph.heuristic_index))
    assert not o.passed and o.cudnn.mismatched > 0
    engine.clear_cache()


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_sinks_forward_and_backward(engine, backward):
    config = SdpaConfig(b=2, h_q=16, h_kv=16, s_q=2048, s_kv=2048, d_qk=64, d_v=64, dtype="bf16", sink=True,
                        window=128, backward=backward)  # fmt: skip
    r = engine.run(config, RunOptions(autotune=False))
    if backward and r.status == "unsupported":  # said in cuDNN's words, not crashed
        assert r.pass_of("backward").message
        return
    passed(r)
    if backward:
        assert "dSink" in {c.output for c in r.pass_of("backward").checks}


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3"])
def test_packed_queries_over_a_paged_cache_match_or_are_refused_with_their_peers_checked(engine, dtype):
    """Chunked prefill into pages: Q and O packed tokens, K and V pools. Where cuDNN declines it,
    the reference and Flex still run on the same tensors (the hunt's FP8 THD paged crash was the
    tool packing the pools)."""
    config = SdpaConfig(b=3, s_q=64, s_kv=1024, seq_lens_q=(64, 5, 17), seq_lens_kv=(1024, 100, 640),
                        layout="THD", page_size=64, causal="bottom_right", **{**GQA, "dtype": dtype})  # fmt: skip
    r = engine.run(config, RunOptions(autotune=False, peers=("flex",)))
    assert r.crash is None, r.crash
    if r.status == "unsupported":
        assert r.forward.message and r.forward.checks, r.forward  # cuDNN's words, and the peer checked
        assert all(m.passed for c in r.forward.checks for m in c.peers.values()), r.forward.checks
        return
    passed(r)


@pytest.mark.parametrize("rows", ["stats", "max_sum_exp"])
def test_softmax_row_outputs_match_or_are_refused(engine, rows):
    config = SdpaConfig(
        b=2, h_q=8, h_kv=8, s_q=1024, s_kv=1024, d_qk=64, d_v=64, dtype="bf16", softmax_out=rows
    )
    r = engine.run(config, RunOptions(autotune=False))
    if r.status == "unsupported":
        assert r.forward.message
        return
    passed(r)
    want = {"stats": {"Stats"}, "max_sum_exp": {"Max", "SumExp"}}[rows]
    assert want <= {c.output for c in r.forward.checks}


def test_plans_say_where_they_come_from(engine):
    config = DECODE.replace(heuristics=("A", "FALLBACK", "OPENSOURCE"))
    r = engine.run(config, RunOptions(autotune=False))
    sources = {p.source for p in r.forward.plans}
    assert "backend engine" in sources, r.forward.plans


def test_the_engine_process_explains_an_fp8_refusal_on_its_gpu():
    """The dashboard's Explain pane asks the engine process, where a plan build that crashes costs
    that process alone: on Hopper, FP8 with half output is refused (Blackwell only) and FP8 output
    is the nearest configuration that builds."""
    from tui.process.session import EngineSession

    with EngineSession() as session:
        assert session.ready() is not None and session.environment.gpu_available
        e = session.explain(SdpaConfig(dtype="fp8_e4m3", out_dtype="fp16"))
    assert e.gpu and e.verdict == "refused"
    assert any("Blackwell" in refusal.message for refusal, _cells in e.refusals())
    assert any(n.changes and n.plan_names for n in e.nearest), e.nearest
