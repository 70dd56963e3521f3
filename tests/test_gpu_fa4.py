"""FlashAttention-4 as a peer on the GPU (skipped where CUDA or `flash_attn.cute` is not there:
`uv sync --extra peers` brings it): forward on a few shapes, each checked against the fp32
reference, its compile kept apart from its kernel time; its backward on a training preset, each
gradient checked, and the step set beside cuDNN's."""

import pytest

from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig
from tui.present.peer_steps import step_rows
from tui.store.presets import load_all

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::UserWarning")]

SHAPES = {
    "GQA prefill": SdpaConfig(
        b=1, h_q=32, h_kv=8, s_q=2048, s_kv=2048, d_qk=128, d_v=128, dtype="bf16", causal="top_left"
    ),
    "decode, bottom-right": SdpaConfig(
        b=8, h_q=32, h_kv=8, s_q=1, s_kv=4096, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"
    ),
    "window and sinks": SdpaConfig(
        b=1, h_q=64, h_kv=8, s_q=2048, s_kv=2048, d_qk=64, d_v=64, dtype="bf16", causal="top_left",
        window=128, sink=True,
    ),
    "packed THD": SdpaConfig(
        b=4, h_q=32, h_kv=8, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right",
        layout="THD", seq_lens_q=(1024, 700, 333, 64), seq_lens_kv=(1024, 700, 333, 64),
    ),
    "paged decode": SdpaConfig(
        b=16, h_q=32, h_kv=8, s_q=1, s_kv=4096, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right",
        page_size=64, seq_lens_q=(1,) * 16, seq_lens_kv=tuple(4096 - 200 * i for i in range(16)),
    ),
}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def fa4():
    return pytest.importorskip(
        "flash_attn.cute", reason="flash-attn-4 is not installed: uv sync --extra peers"
    )


@pytest.fixture(scope="module")
def engine():
    return Engine()


def fa4_of(p):
    return next(peer for peer in p.field_peers if peer.short == "FA4")


@pytest.mark.parametrize("shape", SHAPES)
def test_fa4s_forward_is_timed_and_checked_beside_cudnn(engine, shape):
    r = engine.run(SHAPES[shape], RunOptions(peers=("fa4",), autotune=False))
    assert r.status == "ok", r.message
    peer = fa4_of(r.forward)
    assert peer.ran, peer.reason
    o = next(c for c in r.forward.checks if c.output == "O")
    assert o.peers[peer.name].passed, o.peers[peer.name]
    assert peer.timing.median_us > 0 and peer.tflops > 0
    assert not peer.timing_method, peer.timing_method  # captured in a CUDA graph, as cuDNN's plans are
    assert peer.compile_seconds is not None and peer.compile_seconds > 0


def test_fa4s_backward_on_the_training_preset_is_checked_and_its_step_set_beside_cudnns(engine):
    presets, _problems = load_all()
    config = presets["llama3-8b-train"].config
    r = engine.run(config, RunOptions(peers=("fa4", "flash", "flex"), autotune=False))
    assert r.status == "ok", r.message
    backward = r.passes[1]
    for other in backward.field_peers:  # each backward captured and timed as cuDNN's is, or says why not
        eager = other.timing_method.startswith("CUPTI kernel sum over eager calls")
        assert not other.ran or not other.timing_method or eager, (other.name, other.timing_method)
    peer = fa4_of(backward)
    if not peer.ran:  # FA4's own words for a backward it has not on this GPU
        assert peer.reason.startswith("FA4: "), peer.reason
        return
    for c in backward.checks:
        assert c.peers[peer.name].passed, (c.output, c.peers[peer.name])
    rows = {row.name: row for row in step_rows(r)}
    assert rows["cuDNN"].step_us == pytest.approx(r.step_us)
    assert rows[peer.name].step_us > 0 and rows[peer.name].passed is True


@pytest.mark.parametrize("variant", ["prefix-lm:700", "document:1024,512,256,256", "softcap-causal:30,256"])
def test_fa4_takes_the_position_masks_as_its_mask_mod_forward_and_backward(engine, variant):
    """Prefix-LM and documents through FA4's mask_mod (a window through its window_size), each
    output within the pass's tolerance of the reference, whether or not cuDNN built the pass (on
    Hopper with cuDNN 9.19 it is known not to: the peers then run without it)."""
    config = SdpaConfig(b=1, h_q=16, h_kv=8, s_q=2048, s_kv=2048, d_qk=128, d_v=128, dtype="bf16",
                        causal="none", variant=variant, backward=True)  # fmt: skip
    r = engine.run(config, RunOptions(peers=("fa4",), autotune=False))
    for p in r.passes:
        peer = fa4_of(p)
        if p.kind == "backward" and not peer.ran:  # FA4's own words for a backward it has not here
            assert peer.reason.startswith("FA4: "), peer.reason
            continue
        assert peer.ran, (p.kind, peer.reason)
        assert all(c.peers[peer.name].passed for c in p.checks if peer.name in c.peers), p.checks
    # a window is FA4's own window_size; the prefix and documents are its mask_mod
    assert ("mask_mod" in fa4_of(r.forward).description) == (not variant.startswith("softcap"))
