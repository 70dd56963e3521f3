"""Score modifiers (variants): the field's text, cuDNN's rules, the score_mod sub-graph validated on
a CPU, the fp32 reference, Flex's mods and the Mask picture, each against a dense mask by hand."""

from __future__ import annotations

import json

import pytest

from tui.model.config import SdpaConfig
from tui.model.fields import FIELD, from_entries
from tui.model.validation import validate
from tui.model.variants import parse_variant
from tui.present.maskmap import kept_in_row, mask_grid, modifier_words

TEXTS = ["softcap:50", "softcap-causal:30", "softcap-causal:50,24", "prefix-lm:20", "document:32,16,16"]


def small(variant: str, **changes) -> SdpaConfig:
    shape = dict(b=1, h_q=4, h_kv=2, s_q=64, s_kv=64, d_qk=16, d_v=16, causal="none")
    return SdpaConfig(**{**shape, "variant": variant, **changes})


def dense_keep(variant: str, s_q: int, s_kv: int) -> list[list[bool]]:
    """The variant's mask written out from its definition, one score at a time."""
    v = parse_variant(variant)
    starts = [sum(v.documents[:k]) for k in range(len(v.documents))]

    def doc(x):
        return max(k for k, a in enumerate(starts) if a <= x)

    rows = []
    for i in range(s_q):
        row = []
        for j in range(s_kv):
            if v.name == "softcap":
                row.append(True)
            elif v.name == "softcap-causal":
                row.append(j <= i and (v.window is None or i - j < v.window))
            elif v.name == "prefix-lm":
                row.append(j <= i or j < v.prefix)
            else:
                row.append(j <= i and doc(i) == doc(j))
        rows.append(row)
    return rows


# ---- the field ------------------------------------------------------------------------------------
def test_the_field_reads_spellings_back_to_its_canonical_text_and_refuses_in_one_line_naming_itself():
    f = FIELD["variant"]
    assert f.parse(" SoftCap : 50.0 ") == "softcap:50" and f.parse("") == "none"
    assert f.parse("softcap_causal:50,4096") == "softcap-causal:50,4096"
    assert f.parse("document:512, 1024,512") == "document:512,1024,512"
    assert from_entries({"variant": "prefix-lm:256", "causal": "none"}).variant == "prefix-lm:256"
    for text, words in [
        ("foo", "variant: unknown score modifier 'foo' (use none, softcap:CAP"),
        ("softcap", "variant: softcap is written softcap:50"),
        ("softcap:0", "variant: softcap's cap must be a positive finite number (got '0')"),
        ("softcap:nan", "variant: softcap's cap must be a positive finite number (got 'nan')"),
        ("prefix-lm:x", "variant: prefix-lm's prefix length must be a whole number (got 'x')"),
        ("document:" + ",".join(["8"] * 33), "variant: document takes at most 32 documents"),
        ("none:3", "variant: none takes no parameters"),
    ]:
        with pytest.raises(ValueError) as exc:
            f.parse(text)
        assert str(exc.value).startswith(words) and "\n" not in str(exc.value), text
    assert f.problem("softcap:50.0") == "variant must be written 'softcap:50' (got 'softcap:50.0')"
    assert f.problem(50) == "variant must be text such as softcap:50 (got 50)"
    assert SdpaConfig(causal="none", variant="softcap:50").label().endswith("BSHD softcap:50")


def test_cudnns_rules_refuse_what_it_refuses_beside_a_score_mod_and_say_what_works():
    def said(c):
        return [(e.field, e.message) for e in validate(c)]

    (error,) = said(SdpaConfig(variant="softcap:50"))  # the seed is causal
    assert error[0] == "variant" and "cannot go with the causal mask" in error[1]
    assert error[1].endswith("write it inside the modifier: variant softcap-causal:50 with causal none")
    (error,) = said(SdpaConfig(variant="softcap:50", window=128))
    assert error[1].endswith("variant softcap-causal:50,128 with causal none and no window")
    (error,) = said(SdpaConfig(variant="document:512,512"))
    assert error[1].endswith("document writes its causal mask inside the modifier: set causal none")
    (error,) = said(SdpaConfig(variant="softcap:50", causal="none", window=128))  # no causal: not the same
    assert error[1].endswith("; set no window")
    padded = SdpaConfig(b=2, causal="none", variant="softcap:50", seq_lens_q=(9, 9), seq_lens_kv=(9, 9))
    assert [m for _f, m in said(padded)] == [
        "the score modifier softcap:50 cannot go with a padding mask (real lengths, a paged cache or packed THD "
        "tokens): cuDNN refuses a score_mod beside it"
    ]
    assert "ALiBi" in said(small("softcap:50", alibi=True, h_kv=4))[0][1]
    assert said(small("prefix-lm:65"))[0][1] == "prefix-lm's prefix of 65 is longer than s_kv (64)"
    assert "must add up to the sequence length" in said(small("document:32,16"))[0][1]
    assert all(said(small(text)) == [] for text in TEXTS)


# ---- cuDNN's sub-graph, on a CPU ---------------------------------------------------------------------
@pytest.mark.parametrize("text", TEXTS)
def test_each_variants_graphs_pass_validate_on_a_cpu_with_its_score_mod(text):
    """validate() of the forward and the backward, the callbacks named in the JSON; and the
    sub-graph each callback adds (cuDNN calls it when it lowers: here on a graph of our own)."""
    import cudnn

    from tui.engine.graph import define_and_validate
    from tui.engine.score_mod import ScoreMod

    config = small(text, backward=True)
    for backward in (False, True):
        g = define_and_validate(config, backward=backward)
        assert [p.name for p in g.phases] == ["define", "validate"] and all(p.ok for p in g.phases)
        params = json.loads(g.described)["nodes"][0]["params"]
        assert params["score_mod"] == f'ScoreMod("{text}")'
        assert params.get("score_mod_bprop") == (f'ScoreMod("{text}").bprop' if backward else None)
        assert "use_causal_mask" not in params and "diagonal_band_left_bound" not in params
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT)  # fmt: skip
    score = graph.tensor(name="s", dim=[1, 4, 64, 64], data_type=cudnn.data_type.FLOAT, is_virtual=True)
    mod = ScoreMod(text)
    out = mod(graph, score)
    grad = mod.bprop(graph, out)
    modes = [n["params"].get("mode") for n in json.loads(str(graph))["nodes"]]
    v = parse_variant(text)
    assert ("tanh" in modes, "tanh_backward" in modes) == (v.cap is not None, v.cap is not None)
    assert modes.count("binary_select") == (2 if v.masks else 0)
    assert modes.count("logical_or") == 2 * (v.prefix is not None)
    assert modes.count("cmp_eq") == 2 * (len(v.documents) > 1)
    assert out is not score and grad is not out


@pytest.mark.parametrize("cap", [56.7, 22.2, 50.0])
def test_the_cap_reaches_cuDNN_and_the_script_as_an_fp32(cap):
    """cuDNN 9.19 makes O non-finite from a scalar that is not exactly an fp32 (the hunt's softcap
    56.7): the graph's scalars and the script's are the cap rounded to fp32, its text as typed."""
    import struct

    import cudnn

    from tui.engine.score_mod import ScoreMod
    from tui.present.repro_variant import score_mod_class

    fp32 = struct.unpack("f", struct.pack("f", cap))[0]
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT)  # fmt: skip
    score = graph.tensor(name="s", dim=[1, 1, 8, 8], data_type=cudnn.data_type.FLOAT, is_virtual=True)
    mod = ScoreMod(f"softcap:{cap:g}")
    mod.bprop(graph, mod(graph, score))
    values = {t.pass_by_value for t in graph._tensors.values() if t.pass_by_value is not None}
    assert values == {fp32} and (cap == 50.0) == (fp32 == cap)
    assert mod.variant.text == f"softcap:{cap:g}"
    script = "\n".join(score_mod_class(small(f"softcap:{cap:g}", backward=True)))
    assert script.count(f"tensor_scalar({fp32!r},") == 2


def test_fp8_has_no_score_mod_and_the_plan_cache_is_not_used_and_says_so(tmp_path):
    from tui.engine.graph import GraphBuildError, build, define_and_validate
    from tui.store.plan_cache import PlanCache

    with pytest.raises(GraphBuildError, match="sdpa_fp8 has no option for a score modifier"):
        define_and_validate(small("softcap:30", dtype="fp8_e4m3"))
    cache = PlanCache(tmp_path)
    with pytest.raises(GraphBuildError):  # no GPU here: the build stops at planning, the cache passed by
        build(small("softcap:30"), None, cache=cache, machine="cpu")
    assert cache.notes and cache.notes[0].startswith(
        "plan cache not used: a score modifier is a score_mod callback"
    )


# ---- the reference and Flex's mods -------------------------------------------------------------------
@pytest.mark.parametrize("text", TEXTS)
def test_the_reference_applies_the_variant_forward_and_backward(text):
    """softmax(cap * tanh(s / cap) masked) v by hand, on dense scores, and its autograd."""
    import torch

    from tui.engine.reference import drawn_values, reference_fp32, reference_grads

    config = small(text, backward=True)
    values = drawn_values(config, "cpu", 0)
    q, k, v, d_o = (values[n].float() for n in ("q", "k", "v", "dO"))
    keep = torch.tensor(dense_keep(text, config.s_q, config.s_kv))
    cap = parse_variant(text).cap

    def by_hand(q, k, v):
        kk, vv = (x.repeat_interleave(2, dim=1) for x in (k, v))
        s = q @ kk.transpose(-1, -2) * config.scale
        s = cap * torch.tanh(s / cap) if cap else s
        return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ vv

    assert torch.allclose(reference_fp32(config, q, k, v), by_hand(q, k, v), atol=1e-5)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    want = torch.autograd.grad((by_hand(*leaves) * d_o).sum(), leaves)
    for got, expected in zip(reference_grads(config, q, k, v, d_o), want, strict=True):
        assert torch.allclose(got, expected, atol=1e-4)
    plain = reference_fp32(config.replace(variant="none"), q, k, v)
    assert not torch.allclose(plain, by_hand(q, k, v), atol=1e-3)  # the variant changes the answer


@pytest.mark.parametrize("text", TEXTS)
def test_flexs_mods_are_the_references(text):
    import torch

    from tui.engine.modifiers import flex_mask_mod, flex_score_mod
    from tui.engine.peers import Tensors, mask_mod, score_mod

    config = small(text)
    v = config.modifier
    i, j = torch.arange(64).view(-1, 1), torch.arange(64).view(1, -1)
    keep = torch.tensor(dense_keep(text, 64, 64))
    mask = mask_mod(config, "cpu")
    if v.masks:
        assert torch.equal(mask(0, 0, i, j), keep) and torch.equal(flex_mask_mod(v)(0, 0, i, j), keep)
    else:
        assert mask is None
    s = torch.linspace(-200, 200, 9)
    mod = score_mod(config, Tensors(torch.zeros(1), None, None))
    if v.cap is None:
        assert mod is None and flex_score_mod(v) is None
    else:
        assert torch.allclose(mod(s, 0, 0, 0, 0), v.cap * torch.tanh(s / v.cap))
        assert float(mod(s, 0, 0, 0, 0).abs().max()) < v.cap


# ---- the Mask picture and the FLOPs -----------------------------------------------------------------
@pytest.mark.parametrize("text", TEXTS)
def test_the_mask_picture_and_the_kept_pairs_are_the_variants_mask(text):
    config = small(text)
    keep = dense_keep(text, 64, 64)
    for i in range(64):
        for c0, c1 in ((0, 64), (10, 30), (40, 41)):
            assert kept_in_row(config, 0, i, c0, c1) == sum(keep[i][c0:c1]), (i, c0, c1)
    assert config.kept_pairs() == sum(map(sum, keep))
    assert config.flops() == 2 * config.h_q * sum(map(sum, keep)) * (config.d_qk + config.d_v)
    grid = mask_grid(config, 0, 4, 4)
    assert grid[0][0] > 0 and len(grid) == 4
    assert modifier_words(config).startswith(f"score modifier {text}: ")
    assert modifier_words(SdpaConfig()) == ""


def test_a_prefix_lm_grid_is_a_causal_triangle_with_its_prefix_kept_whole():
    grid = mask_grid(SdpaConfig(s_q=8, s_kv=8, causal="none", variant="prefix-lm:4"), 0, 8, 8)
    assert grid[0] == [1, 1, 1, 1, 0, 0, 0, 0] and grid[5] == [1, 1, 1, 1, 1, 1, 0, 0]
    documents = mask_grid(SdpaConfig(s_q=6, s_kv=6, causal="none", variant="document:3,3"), 0, 6, 6)
    assert documents[4] == [0, 0, 0, 1, 1, 0]


# ---- explain ----------------------------------------------------------------------------------------
def test_explain_puts_the_causal_mask_inside_the_modifier_first():
    from tui.engine.explain import explain
    from tui.model.results import Environment

    config = SdpaConfig(b=1, h_q=4, h_kv=4, s_q=256, s_kv=256, variant="softcap:50", window=64)
    e = explain(config, gpu=False, environment=Environment(gpu_available=False, unavailable_reason="test"))
    assert e.verdict == "refused" and "cannot go with a sliding window" in e.rules[0].message
    first = e.nearest[0]
    assert first.config == config.replace(causal="none", window=None, variant="softcap-causal:50,64")
    assert first.command.endswith("--causal none --variant softcap-causal:50,64")


def test_explain_offers_the_softcap_without_its_window_where_cuDNN_declines_the_window():
    """A window inside softcap-causal compares positions with a number: cuDNN 9.19 declines it on
    Hopper (a known refusal), so the nearest configuration explain tries keeps the cap and the
    causal mask and drops the window; a softcap without a window is offered no such edit."""
    from tui.model.validation import modifier_edits

    local = SdpaConfig(b=1, h_q=4, h_kv=4, s_q=256, s_kv=256, causal="none", variant="softcap-causal:50,64")
    assert modifier_edits(local) == [{"variant": "softcap-causal:50"}]
    assert modifier_edits(local.replace(variant="softcap-causal:50")) == []
    assert modifier_edits(local.replace(variant="prefix-lm:64")) == []
