"""Input recipes (model/inputs.py, engine/recipes.py): the text and its rules; the seed the recipe
keeps; NaN exactly where no output may read (past real lengths, a pool's spare pages and page
tails, a packed buffer's tail, the gaps of padded strides) and the real parts as drawn; the check
reading the real parts only; the magnitudes the LSE shows; and the default changing nothing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, Inputs
from tui.engine.reference import softmax_rows
from tui.engine.storage import logical
from tui.engine.tensors import backward_tensors, device_tensors
from tui.model.config import SdpaConfig
from tui.model.fields import FIELD, from_entries
from tui.model.inputs import (
    DEFAULT,
    STRIDE_GAP,
    Recipe,
    canonical_inputs,
    hazard_recipes,
    parse_inputs,
    spare_pages,
)
from tui.model.sampling import random_configs
from tui.model.tensor_plan import tensor_plan
from tui.model.validation import validate

PADDED = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=48, s_kv=64, d_qk=16, d_v=16, causal="bottom_right",
                    seq_lens_q=(48, 17), seq_lens_kv=(64, 30))  # fmt: skip
PAGED = SdpaConfig(b=3, h_q=4, h_kv=2, s_q=1, s_kv=80, d_qk=16, d_v=16, causal="bottom_right", page_size=16,
                   seq_lens_q=(1, 1, 1), seq_lens_kv=(80, 17, 40))  # fmt: skip
PACKED = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=32, s_kv=32, d_qk=16, d_v=16, layout="THD", backward=True,
                    seq_lens_q=(32, 9), seq_lens_kv=(32, 9))  # fmt: skip


# ---- the text -----------------------------------------------------------------------------------
def test_a_recipe_is_read_in_any_order_and_kept_in_one():
    assert canonical_inputs(" Pad:NaN, scale:100 ,seed:7,near_equal") == "seed:7,scale:100,near-equal,pad:nan"
    assert parse_inputs("seed:7,scale:100,near-equal,pad:nan") == Recipe(7, 100.0, 0.0, True, "nan")
    assert (
        canonical_inputs("") == canonical_inputs("normal") == "normal" and parse_inputs("normal") == DEFAULT
    )
    assert from_entries({"inputs": "shift:-1e3, pad:zero"}).inputs == "shift:-1000,pad:zero"
    assert "inputs[seed:7,pad:nan]" in SdpaConfig(inputs="seed:7,pad:nan").label()
    assert "inputs" not in SdpaConfig().label()


@pytest.mark.parametrize(
    "text, words",
    [
        ("pad:foo", "pad:nan or pad:zero"),
        ("scale:0", "above 0"),
        ("scale:1e9", "at most 1000"),
        ("shift:x", "must be a number"),
        ("seed:-1", "whole number from 0"),
        ("pad:nan,pad:zero", "given twice"),
        ("normal,pad:nan", "without items"),
        ("near-equal:2", "written near-equal"),
        ("strides:wide", "strides:padded"),
        ("noise:3", "unknown input item"),
    ],
)
def test_a_wrong_recipe_is_one_line_naming_the_field_and_what_to_write(text, words):
    message = FIELD["inputs"].problem(text) or ""
    assert message.startswith("input recipe") and words in message and "\n" not in message
    with pytest.raises(ValueError, match="input recipe"):
        from_entries({"inputs": text})


@settings(max_examples=60, deadline=None)
@given(
    seed=st.none() | st.integers(0, (1 << 63) - 1),
    scale=st.sampled_from([1.0, 0.5, 30.0, 1000.0]),
    shift=st.sampled_from([0.0, -1000.0, 2.5]),
    near=st.booleans(),
    pad=st.sampled_from([None, "nan", "zero"]),
    strides=st.sampled_from([None, "padded"]),
)
def test_every_recipe_reads_back_from_its_text(seed, scale, shift, near, pad, strides):
    recipe = Recipe(seed, scale, shift, near, pad, strides)
    assert parse_inputs(recipe.text) == recipe and canonical_inputs(recipe.text) == recipe.text


def test_padded_strides_take_a_dense_layout_and_sixteen_bit_inputs():
    problems = {e.field: e.message for e in validate(PACKED.replace(inputs="strides:padded"))}
    assert "dense layout" in problems["inputs"]
    assert "fp16 or bf16" in validate(SdpaConfig(dtype="fp8_e4m3", inputs="strides:padded"))[0].message
    assert validate(PADDED.replace(inputs="pad:nan,strides:padded")) == []


def test_hazard_recipes_are_valid_for_the_configurations_the_generator_draws():
    rng = random.Random(4)
    configs = random_configs(seed=9, n=40, max_elements=1 << 16)
    for config in configs:
        recipes = hazard_recipes(rng, config)
        assert recipes and all(canonical_inputs(r) == r for r in recipes)
        unused = config.varlen or config.paged or config.packed  # NaN where it has somewhere to go
        assert any("pad:nan" in r and "strides" not in r for r in recipes) == unused, config
        for text in recipes:
            assert validate(config.replace(inputs=text)) == [], (config.label(), text)
    assert any(c.inputs != "normal" for c in random_configs(seed=1, n=60, max_elements=1 << 16))


# ---- the engine's tensors -----------------------------------------------------------------------
def nan_rows(t, n: int) -> bool:
    """Rows from `n` on of a (h, s, d) block NaN, the rows before them finite."""
    import torch

    return bool(torch.isnan(t[:, n:].float()).all()) and bool(torch.isfinite(t[:, :n].float()).all())


def test_the_recipes_seed_is_the_inputs_seed_whatever_the_run_asks():
    import torch

    ours = device_tensors(PADDED.replace(inputs="seed:5"), "cpu", 0)
    run = device_tensors(PADDED, "cpu", 5)
    assert all(torch.equal(ours[n], run[n]) for n in ("q", "k", "v"))
    assert torch.equal(device_tensors(PADDED.replace(inputs="seed:5"), "cpu", 9)["q"], ours["q"])


def test_nan_fills_each_sequence_past_its_real_length_and_nothing_else():
    import torch

    c = PADDED.replace(inputs="pad:nan", bias="bx1")
    data, plain = device_tensors(c, "cpu", 0), device_tensors(c.replace(inputs="normal"), "cpu", 0)
    for name, side in (("q", 0), ("k", 1), ("v", 1)):
        for i in range(c.b):
            n = c.lengths(i)[side]
            assert nan_rows(data[name][i], n), (name, i)
            assert torch.equal(data[name][i, :, :n], plain[name][i, :, :n]), (name, i)
    bias = data["bias"]  # each batch entry's bias outside its real (query, key) block
    assert torch.isnan(bias[1, :, 17:]).all() and torch.isnan(bias[1, :, :17, 30:]).all()
    assert torch.isfinite(bias[1, :, :17, :30]).all() and torch.isfinite(bias[0]).all()
    backward = backward_tensors(
        c.replace(backward=True), device_tensors(c.replace(backward=True), "cpu", 0), "cpu", 0
    )
    assert nan_rows(backward["dO"][1], 17)


def test_nan_fills_a_pools_spare_pages_and_last_page_tails_through_the_table():
    import torch

    c = PAGED.replace(inputs="pad:nan")
    assert spare_pages(c) == 3 * 5 - (5 + 2 + 3)
    data = device_tensors(c, "cpu", 0)
    spec = next(s for s in tensor_plan(c).reads if s.name == "k")
    assert tuple(data["k"].shape) == spec.dims == (15, 2, 16, 16)
    table = data["paged_attention_k_table"].view(3, -1)
    assert (
        len(set(table.flatten().tolist())) == 15
    )  # each entry past a sequence's last page a spare of its own
    gathered = logical(c, data, "k")
    for i, n in enumerate((80, 17, 40)):
        assert nan_rows(gathered[i], n), i
    plain = logical(c.replace(inputs="normal"), device_tensors(c.replace(inputs="normal"), "cpu", 0), "k")
    assert all(torch.equal(gathered[i, :, :n], plain[i, :, :n]) for i, n in enumerate((80, 17, 40)))


def test_nan_fills_a_packed_buffer_past_its_real_tokens():
    import torch

    c = PACKED.replace(inputs="pad:nan")
    data = device_tensors(c, "cpu", 0)
    for name in ("q", "k", "v"):
        assert data[name].shape[0] == c.b * 32  # the tokens the graph's dims declare
        assert torch.isnan(data[name][41:]).all() and torch.isfinite(data[name][:41]).all(), name
    back = logical(c, data, "q")
    plain = logical(c.replace(inputs="normal"), device_tensors(c.replace(inputs="normal"), "cpu", 0), "q")
    assert torch.equal(back, plain)  # unpacked: the real tokens, zeros past them


def test_padded_strides_leave_gaps_the_graph_declares_and_the_fill_holds():
    import torch

    c = PADDED.replace(inputs="pad:nan,strides:padded", layout="BHSD")
    data = device_tensors(c, "cpu", 0)
    specs = {s.name: s for s in (*tensor_plan(c).reads, *tensor_plan(c).writes)}
    for name in ("q", "k", "v", "o"):
        t = data[name]
        assert t.stride() == specs[name].strides and t.stride()[2] == c.d_qk + STRIDE_GAP, name
    q = data["q"]
    memory = torch.as_strided(q, (q.untyped_storage().nbytes() // q.element_size(),), (1,))
    row = memory[: q.stride()[2]]  # batch 0, head 0, its first token: d values, then the gap
    assert torch.isfinite(row[: c.d_qk]).all() and torch.isnan(row[c.d_qk :]).all()


def test_the_check_reads_the_real_parts_only_and_the_default_changes_nothing():
    """With NaN in every unused part the reference and its gradients are finite and the default's,
    to rounding; the default recipe's inputs are the inputs as drawn, to the bit."""
    import torch

    for base in (PADDED.replace(backward=True), PACKED):
        c = base.replace(inputs="pad:nan")
        results = []
        for config in (c, base):
            fwd = device_tensors(config, "cpu", 0)
            bwd = backward_tensors(config, fwd, "cpu", 0)
            raw = Inputs(
                *(logical(config, fwd, n) for n in "qkv"), fwd.get("bias"), logical(config, bwd, "dO")
            )
            inputs = raw.real_parts(config)
            if config is base:
                assert all(
                    a is b for a, b in zip((raw.q, raw.k, raw.v), (inputs.q, inputs.k, inputs.v), strict=True)
                )
            results.append(
                {**FORWARD_PASS.reference(config, inputs), **BACKWARD_PASS.reference(config, inputs)}
            )
        rows = {**FORWARD_PASS.rows(c, "cpu"), **BACKWARD_PASS.rows(c, "cpu")}
        for name, ref in results[0].items():
            mask = (
                rows[name].expand(ref.shape) if rows[name] is not None else torch.ones_like(ref, dtype=bool)
            )
            assert torch.isfinite(ref[mask]).all(), (c.label(), name)
            assert torch.allclose(ref[mask], results[1][name][mask], atol=1e-6), (c.label(), name)


def test_magnitudes_move_the_lse_where_the_recipe_says():
    base = SdpaConfig(b=1, h_q=2, h_kv=2, s_q=32, s_kv=32, d_qk=16, d_v=16, causal="none")

    def lse(text: str):
        c = base.replace(inputs=text)
        d = device_tensors(c, "cpu", 0)
        top, total = softmax_rows(c, d["q"], d["k"])
        return (top + total.log()).flatten(), top, total

    normal = lse("normal")[0]
    assert float(normal.abs().max()) < 10
    shifted = lse("shift:-1000")[0]
    assert float(shifted.max()) < -900 and float(shifted.min()) > -1100  # very negative LSE
    assert float(lse("scale:300")[0].max()) > 100  # sharp rows: a very large LSE
    flat = lse("near-equal")[2]  # near-equal scores: the sum of exponents near the number of keys
    assert float(flat.min()) > 0.9 * base.s_kv
