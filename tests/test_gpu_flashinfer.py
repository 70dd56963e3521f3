"""FlashInfer on the H200, where it imports: at any batch, on the engine's own pages, timed and
checked beside cuDNN (skipped elsewhere; its kernels compile on first use, minutes without a warm
cache: benchmarks/flashinfer_loop.py warms it)."""

import pytest

from tui.engine.runner import Engine, RunOptions
from tui.engine.timing import profiler_kernel_time
from tui.model.config import SdpaConfig
from tui.store.presets import load_all

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::UserWarning")]
flashinfer = pytest.importorskip("flashinfer")

SHAPES = {
    "paged decode": "llama3-8b-paged-decode-p16",
    "paged prefill": "llama3-8b-chunked-prefill",
    "dense decode": "llama3-8b-decode",
    "padding": "varlen-batch",
    "window": "mistral-7b-swa",
}
WRAPPERS = {"paged decode": "Decode", "paged prefill": "PrefillWithPaged", "dense decode": "Decode",
            "padding": "Ragged", "window": "Ragged"}  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_flashinfer_runs_the_preset_on_its_own_storage_and_passes(shape):
    config = load_all()[0][SHAPES[shape]].config
    r = Engine().run(config, RunOptions(peers=("flashinfer",), autotune=False))
    assert r.status == "ok", r.message
    (peer,) = r.forward.field_peers
    assert peer.ran, peer.reason
    errors = next(c for c in r.forward.checks if c.output == "O").peers
    assert errors[peer.name].passed, errors[peer.name]
    assert peer.timing.median_us > 0 and peer.compile_seconds is not None  # plan() apart
    assert WRAPPERS[shape] in peer.description, peer.description


def test_a_batch_of_mixed_real_lengths_in_pages_and_gqa():
    config = SdpaConfig(b=6, h_q=32, h_kv=4, s_q=300, s_kv=1500, d_qk=128, d_v=128, dtype="bf16",
                        causal="bottom_right", page_size=32, seq_lens_q=(300, 1, 64, 200, 17, 300),
                        seq_lens_kv=(1500, 700, 64, 1200, 33, 900))  # fmt: skip
    r = Engine().run(config, RunOptions(peers=("flashinfer",), autotune=False))
    assert r.status == "ok", r.message
    (peer,) = r.forward.field_peers
    assert peer.ran, peer.reason
    assert next(c for c in r.forward.checks if c.output == "O").peers[peer.name].passed


def test_flashinfers_kernel_time_agrees_with_an_independent_loop():
    """The tool's figure for a paged decode against FlashInfer's own wrapper on pages of the same
    shape, timed by CUPTI over eager calls."""
    import torch

    config = load_all()[0]["llama3-8b-paged-decode-p16"].config
    r = Engine().run(config, RunOptions(peers=("flashinfer",), autotune=False))
    (peer,) = r.forward.field_peers
    assert peer.ran, peer.reason
    b, size, pages_each = config.b, config.page_size, config.s_kv // config.page_size
    pool = [torch.randn(b * pages_each, config.h_kv, size, config.d_qk, device="cuda", dtype=torch.bfloat16)
            for _ in range(2)]  # fmt: skip
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "HND")
    ints = lambda x: torch.tensor(x, dtype=torch.int32, device="cuda")  # noqa: E731
    wrapper.plan(ints([i * pages_each for i in range(b + 1)]), ints(torch.randperm(b * pages_each).tolist()),
                 ints([size] * b), config.h_q, config.h_kv, config.d_qk, size, q_data_type=torch.bfloat16,
                 kv_data_type=torch.bfloat16, sm_scale=config.scale)  # fmt: skip
    q = torch.randn(b, config.h_q, config.d_qk, device="cuda", dtype=torch.bfloat16)
    loop_us, _ = profiler_kernel_time(lambda: wrapper.run(q, tuple(pool)), calls=50)
    assert 0.85 < peer.timing.median_us / loop_us < 1.15, (peer.timing.median_us, loop_us)
