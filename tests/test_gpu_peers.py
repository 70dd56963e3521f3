"""Peers on the H200: each timed like a cuDNN plan, checked on the same tensors (skipped elsewhere)."""

import pytest

from tui.engine.peers import PEER_KEYS
from tui.engine.runner import Engine, RunOptions
from tui.engine.timing import profiler_kernel_time
from tui.model.config import SdpaConfig

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::UserWarning")]

PREFILL = SdpaConfig(
    b=1, h_q=32, h_kv=8, s_q=2048, s_kv=2048, d_qk=128, d_v=128, dtype="bf16", causal="top_left"
)


def test_every_peer_is_timed_and_checked_beside_cudnn_or_says_why_not():
    r = Engine().run(PREFILL, RunOptions(peers=PEER_KEYS))
    assert r.status == "ok", r.message
    f = r.forward
    by = {p.short: p for p in f.field_peers}
    assert set(by) == {"FLASH", "EFFICIENT", "CUDNN", "MATH", "Flex", "FA3", "FA4", "FlashInfer"}
    errors = next(c for c in f.checks if c.output == "O").peers
    for short in ("FLASH", "CUDNN", "MATH", "Flex"):
        p = by[short]
        assert p.ran, (short, p.reason)
        assert errors[p.name].passed, (short, errors[p.name])
        assert p.timing.median_us > 0 and p.tflops > 0 and p.timing.regime == "burst"
    assert by["EFFICIENT"].ran or by["EFFICIENT"].reason  # refuses GQA on torch 2.11: said in its words
    assert by["Flex"].compile_seconds > 0
    assert "not installed" in by["FA3"].reason
    fi = by["FlashInfer"]  # where it is installed it runs (test_gpu_flashinfer.py checks it)
    assert (fi.ran and errors[fi.name].passed) or "pip install flashinfer-python" in fi.reason, fi.reason
    # torch's CUDNN backend runs cuDNN's own kernel: near the engine's figure for cuDNN's plans
    fastest = min(p.timing.median_us for p in f.plans if p.timing)
    assert 0.8 < by["CUDNN"].timing.median_us / fastest < 1.25, (by["CUDNN"].timing.median_us, fastest)


def test_a_peers_kernel_time_agrees_with_an_independent_profiler_loop():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    r = Engine().run(PREFILL, RunOptions(peers=("flash",), autotune=False))
    flash = r.forward.field_peers[0]
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(PREFILL.q_dims, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(PREFILL.k_dims, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(PREFILL.v_dims, device="cuda", dtype=torch.bfloat16, generator=g)

    def run():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    loop_us, _ = profiler_kernel_time(run, calls=50)
    assert 0.9 < flash.timing.median_us / loop_us < 1.1, (flash.timing.median_us, loop_us)


def test_a_training_step_times_and_checks_each_peers_backward():
    step = PREFILL.replace(s_q=1024, s_kv=1024, backward=True)
    r = Engine().run(step, RunOptions(peers=("flash", "flex", "math"), autotune=False))
    assert r.status == "ok", r.message
    backward = r.passes[1]
    by = {p.short: p for p in backward.field_peers}
    for short in ("FLASH", "Flex", "MATH"):
        p = by[short]
        assert p.ran, (short, p.reason)
        assert p.timing.median_us > 0 and p.tflops > 0, short
        for c in backward.checks:
            assert c.peers[p.name].passed, (short, c.output, c.peers[p.name])
    assert by["Flex"].compile_seconds > 0


def test_flex_is_compiled_for_every_shape_one_process_meets():
    """Past torch.compile's recompile limit (8 shapes) Flex would run eagerly, 40-90x slower, and
    the check's later rows timed that: every shape here is a graph compiled of its own."""
    from torch._dynamo.utils import counters

    engine, shapes = Engine(), [128 + 64 * i for i in range(12)]
    before = counters["stats"]["unique_graphs"]
    for s in shapes:
        config = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=s, s_kv=s, d_qk=64, d_v=64, dtype="bf16")
        r = engine.run(config, RunOptions(peers=("flex",), autotune=False))
        flex = r.forward.field_peers[0]
        assert flex.ran and flex.compile_seconds > 0, (s, flex.reason)
    assert counters["stats"]["unique_graphs"] - before >= len(shapes)
