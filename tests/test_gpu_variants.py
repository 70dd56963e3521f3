"""Score modifiers on the GPU: each variant's forward through cuDNN's score_mod sub-graph passes
its check, or cuDNN's refusal (in its words, or a known refusal's: its graph then not built) is the
pass's; Flex and FA4 (where installed; prefix-LM and documents as its mask_mod) run beside it
either way and pass (skipped elsewhere)."""

import pytest

from tui.engine.graph import PHASES
from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::UserWarning")]

SHAPE = dict(b=1, h_q=8, h_kv=4, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16", causal="none")
VARIANTS = [
    "softcap:50",
    "softcap-causal:30",
    "softcap-causal:50,256",
    "prefix-lm:300",
    "document:512,256,256",
]


@pytest.fixture(scope="module")
def engine():
    return Engine()


def refused(p) -> bool:
    """Whether cuDNN did not run the pass: its refusal in its own words at the phase that refused,
    or a known refusal's words and key (no graph built: benchmarks/variants_probe.py measured it)."""
    if p.status == "unsupported":
        assert p.message.split(":")[0] in PHASES and len(p.message) > 20, p.message
        return True
    if p.status == "known_issue":
        assert "[score-mod-position-compare-hopper-cudnn-9.19]" in p.message and not p.plans, p.message
        return True
    return False


def peer_passed(p, short: str) -> None:
    """The peer ran on the pass's tensors and each output it wrote is within the pass's tolerance."""
    peer = next(x for x in p.field_peers if x.short == short)
    assert peer.ran and peer.timing is not None, peer.reason
    assert all(c.peers[peer.name].passed for c in p.checks if peer.name in c.peers), p.checks
    assert any(peer.name in c.peers for c in p.checks)


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variants_forward_passes_or_says_cudnns_refusal_and_the_peers_run(engine, variant):
    from tui.engine.peers import ADAPTERS
    from tui.model.fastest import fastest_way

    r = engine.run(SdpaConfig(**SHAPE, variant=variant), RunOptions(peers=("flex", "fa4")))
    f = r.forward
    if refused(f):  # cuDNN did not run it: the peers did, against the same reference
        assert all(c.cudnn is None for c in f.checks) and f.reference.startswith("fp32")
        assert fastest_way(f) is not None and fastest_way(f).declined
    else:
        assert f.status == "ok" and f.passed, (f.status, f.message, [c.cudnn for c in f.checks])
        assert any("plan cache not used" in n for n in f.notes)
        assert any(n.startswith(f"score modifier {variant}") for n in f.notes)
    peer_passed(f, "Flex")
    if not ADAPTERS["fa4"].unavailable():  # the H200 with the DSL: FA4 takes every variant
        peer_passed(f, "FA4")


@pytest.mark.parametrize("preset", ["gemma2-9b-softcap", "gemma2-9b-global-softcap"])
def test_the_gemma2_presets_pass_or_say_cudnns_refusal_for_each_pass_beside_the_peers(engine, preset):
    from tui.store.presets import find

    r = engine.run(find(preset).config, RunOptions(autotune=False, peers=("flex", "fa4")))
    assert [p.kind for p in r.passes] == ["forward", "backward"], r.message
    for p in r.passes:
        assert refused(p) or (p.status == "ok" and p.passed), (p.kind, p.status, p.message)
        for peer in p.field_peers:  # each peer passes, or says why it did not run (d 256, 8192 tokens)
            assert peer.reason or all(c.peers[peer.name].passed for c in p.checks if peer.name in c.peers)
    assert any(peer.ran for peer in r.forward.field_peers), r.forward.field_peers


@pytest.mark.parametrize("cap", ["56.7", "22.2"])
def test_a_cap_that_is_not_an_fp32_passes(engine, cap):
    """The hunt's softcap class: from the cap as a Python float cuDNN 9.19 wrote O non-finite at
    every element; given as its fp32, O is the reference's."""
    config = SdpaConfig(b=1, h_q=1, h_kv=1, s_q=128, s_kv=128, d_qk=64, d_v=64, causal="none",
                        variant=f"softcap:{cap}")  # fmt: skip
    r = engine.run(config, RunOptions(autotune=False))
    assert r.status == "ok" and r.forward.passed, (r.message, r.forward.checks)
    assert r.forward.checks[0].cudnn.nonfinite == 0


def test_cudnns_output_is_the_capped_one(engine):
    """The sub-graph is applied: cuDNN's O is far from the reference without the modifier."""
    from tui.engine.reference import reference_fp32

    config = SdpaConfig(**SHAPE, variant="softcap:2")
    r = engine.run(config, RunOptions(autotune=False))
    if r.forward.status == "unsupported":
        pytest.skip(f"cuDNN refuses a softcap here: {r.forward.message}")
    assert r.forward.passed, r.forward.checks
    built = engine.built_passes(config)["forward"]
    q, k, v = (built.values(n) for n in "qkv")
    plain = reference_fp32(config.replace(variant="none"), q, k, v)
    assert float((built.values("o").float() - plain).abs().max()) > 10 * r.forward.checks[0].atol
