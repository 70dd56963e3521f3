"""Score modifiers on the GPU: each variant's forward through cuDNN's score_mod sub-graph passes
its check, or cuDNN's refusal is the result in cuDNN's words; Flex runs it beside (skipped elsewhere)."""

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


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variants_forward_passes_or_says_cudnns_refusal(engine, variant):
    r = engine.run(SdpaConfig(**SHAPE, variant=variant), RunOptions(peers=("flex",)))
    f = r.forward
    if f.status == "unsupported":  # cuDNN's own words, at the phase that refused
        assert f.message.split(":")[0] in PHASES and len(f.message) > 20, f.message
        return
    assert f.status == "ok" and f.passed, (f.status, f.message, [c.cudnn for c in f.checks])
    assert any("plan cache not used" in n for n in f.notes)
    assert any(n.startswith(f"score modifier {variant}") for n in f.notes)
    flex = next(p for p in f.field_peers if p.short == "Flex")
    assert flex.ran and f.checks[0].peers[flex.name].passed, flex.reason


def test_the_gemma2_preset_passes_or_says_cudnns_refusal_for_each_pass(engine):
    from tui.store.presets import find

    r = engine.run(find("gemma2-9b-softcap").config, RunOptions(autotune=False))
    for p in r.passes:
        assert (p.status == "ok" and p.passed) or (p.status == "unsupported" and p.message), (
            p.kind,
            p.message,
        )


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
