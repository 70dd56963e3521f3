"""The reproduction script, on the CPU: short, only what its configuration uses, and each of its
parts the engine's own to the bit (its graph JSON, its drawn tensors, its reference, its check).
On the GPU test_export.py runs it whole, as a user runs it, against the engine."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types

import pytest

from tui.engine.graph import define
from tui.engine.keywords import UnsupportedOption
from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, Inputs
from tui.engine.storage import logical as logical_of
from tui.engine.tensors import backward_tensors, device_tensors
from tui.engine.tolerances import compare
from tui.model.config import SdpaConfig
from tui.model.sampling import random_configs
from tui.present.repro import FORWARD_LINES, TRAINING_LINES, budget, script
from tui.store.presets import load_all


def shape(b, h_q, h_kv, s_q, s_kv, d_qk, d_v, **options) -> SdpaConfig:
    return SdpaConfig(b=b, h_q=h_q, h_kv=h_kv, s_q=s_q, s_kv=s_kv, d_qk=d_qk, d_v=d_v, **options)


PADDED = {"seq_lens_q": (64, 20), "seq_lens_kv": (64, 33)}
CONFIGS = {
    "fp16": shape(2, 4, 4, 64, 64, 16, 16),
    "bf16-gqa-window-bias-padded": shape(2, 4, 2, 64, 64, 16, 8, dtype="bf16",
                                            window=9, bias="bx1", layout="SBHD", **PADDED),
    "dropout-stats": shape(1, 2, 2, 32, 32, 16, 16, dropout=0.25, dropout_seed=7, softmax_out="stats"),
    "decode-br": shape(2, 8, 2, 1, 96, 16, 16, causal="bottom_right"),
    "paged-decode": shape(3, 4, 2, 1, 80, 16, 16, causal="bottom_right", page_size=16, seq_lens_kv=(80, 17, 40)),
    "thd": shape(2, 4, 2, 48, 48, 16, 16, layout="THD", seq_lens_q=(48, 20), seq_lens_kv=(48, 20)),
    "sink-max-sum-exp": shape(1, 4, 2, 32, 32, 16, 16, dtype="bf16", sink=True, softmax_out="max_sum_exp"),
    "fp8": shape(2, 4, 2, 32, 48, 16, 16, dtype="fp8_e4m3", layout="BHSD", causal="none"),
    "fp8-train": shape(1, 4, 1, 40, 40, 16, 16, dtype="fp8_e4m3", backward=True, deterministic=True),
    "train-alibi-bias-dropout": shape(2, 4, 4, 64, 64, 16, 16, alibi=True, bias="bxh", dropout=0.2, backward=True,
                                      **PADDED),
    "train-thd-sink": shape(2, 4, 2, 32, 32, 16, 16, dtype="bf16", layout="THD", sink=True, backward=True,
                            seq_lens_q=(32, 9), seq_lens_kv=(32, 9)),
    "softcap": shape(1, 2, 2, 32, 32, 16, 16, causal="none", variant="softcap:2.5"),
    "prefix-lm": shape(2, 4, 1, 40, 40, 16, 16, dtype="bf16", causal="none", variant="prefix-lm:12"),
    "train-softcap-causal-window": shape(1, 4, 2, 48, 48, 16, 16, causal="none", variant="softcap-causal:3,20",
                                         backward=True),
    "train-documents": shape(1, 4, 2, 64, 64, 16, 16, causal="none", variant="document:32,16,16", backward=True),
    # input recipes (model/inputs.py): NaN where no output may read, magnitudes, padded strides
    "recipe-padded-bias-nan": shape(2, 4, 2, 64, 64, 16, 8, dtype="bf16", window=9, bias="bx1", layout="SBHD",
                                    inputs="seed:5,scale:30,pad:nan", **PADDED),
    "recipe-paged-nan-shift": shape(3, 4, 2, 1, 80, 16, 16, causal="bottom_right", page_size=16,
                                    seq_lens_q=(1, 1, 1), seq_lens_kv=(80, 17, 40), inputs="shift:-1000,pad:nan"),
    "recipe-fp8-paged-nan": shape(2, 4, 2, 1, 64, 16, 16, dtype="fp8_e4m3", causal="bottom_right", page_size=16,
                                  seq_lens_q=(1, 1), seq_lens_kv=(64, 9), inputs="near-equal,pad:nan"),
    "recipe-train-thd-nan": shape(2, 4, 2, 32, 32, 16, 16, dtype="bf16", layout="THD", backward=True,
                                  seq_lens_q=(32, 9), seq_lens_kv=(32, 9), inputs="pad:nan"),
    "recipe-train-strides-nan": shape(2, 4, 2, 64, 64, 16, 16, backward=True, bias="1xh", inputs="near-equal,pad:nan,strides:padded",
                                      **PADDED),
}  # fmt: skip
VARIANTS = [name for name, c in CONFIGS.items() if c.variant != "none"]
RECIPES = [name for name, c in CONFIGS.items() if c.inputs != "normal"]
IDS, CASES = list(CONFIGS), list(CONFIGS.values())


def load(config: SdpaConfig, seed: int = 0) -> types.ModuleType:
    """A script loaded as a module on the CPU (main() not run), to call its parts."""
    module = types.ModuleType("repro_under_test")
    exec(compile(script(config, seed), "repro.py", "exec"), module.__dict__)
    module.DEVICE = "cpu"
    return module


def dropout_mask(config: SdpaConfig):
    """A stand-in for the mask cuDNN draws (0 and 1 at the dropout rate), seeded."""
    import torch

    gen = torch.Generator().manual_seed(3)
    return (torch.rand(config.b, config.h_q, config.s_q, config.s_kv, generator=gen) > config.dropout).float()


# ---- short, and only what it uses ---------------------------------------------------------------


def test_the_seeds_script_is_short_and_every_preset_within_its_budget():
    assert len(script(SdpaConfig()).splitlines()) <= FORWARD_LINES
    for name, preset in load_all()[0].items():
        c = preset.config
        lines = len(script(c).splitlines())
        assert lines <= budget(c), (name, lines)
    for config in random_configs(seed=5, n=30, max_elements=1 << 16):  # many options at once
        assert len(script(config).splitlines()) <= TRAINING_LINES, config.label()
    for name in RECIPES:  # input recipes write their steps within RECIPE_LINES more
        assert len(script(CONFIGS[name]).splitlines()) <= budget(CONFIGS[name]), name


def test_a_plain_forward_says_nothing_of_what_it_does_not_use():
    text = script(CONFIGS["fp16"]).lower()
    for word in ("fp8", "dropout", "page", "backward", "ragged", "sink", "alibi", "bias", "lens_q", "window"):
        assert word not in text, word
    assert "permute" not in text  # the tutorial's mistake


def test_a_script_says_its_configuration_and_carries_its_pin_and_finding():
    config = CONFIGS["fp8-train"].replace(plan="1 KERNEL_CFG=27")
    text = script(config, seed=3, finding="this configuration crashed")
    assert text.splitlines()[1] == f'"""cuDNN SDPA forward and backward (a training step): {config.label()}'
    assert "What it reproduces: this configuration crashed" in text
    assert "graph.create_execution_plan(1, {cudnn.knob_type.KERNEL_CFG: 27})" in text
    assert load(config, seed=3).SEED == 3


# ---- each part is the engine's ------------------------------------------------------------------


def graph_json(g) -> str:
    return str(g)


@pytest.mark.parametrize("config", CASES, ids=IDS)
def test_a_script_declares_the_engines_graphs(config):
    m = load(config)
    assert graph_json(m.forward_graph(None)[0]) == define(config).json()
    if config.dropout:
        assert graph_json(m.forward_graph(None, dump=True)[0]) == define(config, rng_dump=True).json()
    if config.backward:
        assert graph_json(m.backward_graph(None)[0]) == define(config, backward=True).json()


@pytest.mark.parametrize("name", VARIANTS)
def test_a_scripts_score_mod_builds_the_engines_sub_graph(name):
    """The script's ScoreMod and the engine's add the same operations to a graph, forward and back
    (cuDNN calls them only when it lowers the graph: here on a graph of our own, on the CPU)."""
    import cudnn

    from tui.engine.score_mod import ScoreMod

    config = CONFIGS[name]

    def sub_graph(mod) -> str:
        graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT)  # fmt: skip
        dims = [config.b, config.h_q, config.s_q, config.s_kv]
        score = graph.tensor(name="s", dim=dims, data_type=cudnn.data_type.FLOAT, is_virtual=True)
        mod.bprop(graph, mod(graph, score))
        return str(graph)

    ours = sub_graph(ScoreMod(config.variant))
    assert sub_graph(load(config).ScoreMod(config.variant)) == ours
    assert ("tanh_backward" in ours) == (config.modifier.cap is not None)
    assert ("binary_select" in ours) == config.modifier.masks


def test_random_configurations_script_the_engines_graphs():
    """The sampler's configurations (every field, every combination it draws): the same graph, and
    cuDNN's validate() says the same of both."""
    for config in random_configs(seed=11, n=40, max_elements=1 << 16):
        m = load(config)
        for backward in (False, True) if config.backward else (False,):
            graph_of = m.backward_graph if backward else m.forward_graph
            try:
                ours = define(config, backward=backward)
            except UnsupportedOption as exc:  # the engine refuses it: so does the script, in its words
                with pytest.raises(SystemExit, match=str(exc)):
                    graph_of(None)
                continue
            theirs = graph_of(None)[0]
            assert graph_json(theirs) == ours.json(), config.label()
            assert verdict(theirs) == verdict(ours.graph), config.label()


def verdict(graph) -> str:
    try:
        graph.validate()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "valid"


@pytest.mark.parametrize("config", CASES, ids=IDS)
def test_a_script_draws_and_stores_the_engines_tensors(config):
    import torch

    m = load(config)
    theirs, logical = m.forward_tensors()
    ours = device_tensors(config, "cpu", 0)
    if config.backward:
        theirs, ours = m.backward_tensors(theirs, logical), backward_tensors(config, ours, "cpu", 0)
    assert theirs.keys() == ours.keys()
    written = ("o", "stats", "score_max", "score_sum_exp", "dQ", "dK", "dV", "dSink_token")
    for name, t in ours.items():
        assert theirs[name].dtype == t.dtype and theirs[name].shape == t.shape, name
        assert theirs[name].stride() == t.stride(), name
        if name not in written:  # what the graph writes is uninitialised here
            assert torch.equal(theirs[name].view(torch.uint8), t.view(torch.uint8)), name


@pytest.mark.parametrize("config", CASES, ids=IDS)
def test_a_scripts_reference_is_the_engines(config):
    """The reference written out for this configuration's masks gives the engine's numbers."""
    m = load(config)
    data, logical = m.forward_tensors()
    ours = device_tensors(config, "cpu", 0)
    mask = dropout_mask(config) if config.dropout else None
    inputs = Inputs(
        *(logical_of(config, ours, n) for n in "qkv"), ours.get("bias"), None, mask, ours.get("sink_token")
    ).real_parts(config)  # as the engine's check reads them: an input recipe's fill zeroed
    extra = [t for t, used in ((logical.get("bias"), config.bias != "none"), (data.get("sink_token"), config.sink),
                               (mask, config.dropout)) if used]  # fmt: skip
    theirs = m.reference(logical["q"], logical["k"], logical["v"], *extra)
    rows = FORWARD_PASS.rows(config, "cpu")
    for name, ref in FORWARD_PASS.reference(config, inputs).items():
        assert theirs.keys() == FORWARD_PASS.output_keys(config).keys()
        assert_same_rows(theirs[name], ref, rows[name], name)
    if config.backward:
        backward = backward_tensors(config, ours, "cpu", 0)
        inputs = dataclasses.replace(inputs, d_o=logical_of(config, backward, "dO")).real_parts(config)
        data = m.backward_tensors(data, logical)
        grads = m.reference_grads(logical["q"], logical["k"], logical["v"], logical["dO"], *extra)
        rows = BACKWARD_PASS.rows(config, "cpu")
        for name, ref in BACKWARD_PASS.reference(config, inputs).items():
            assert_same_rows(grads[name], ref, rows[name], name, tol=1e-5 * max(1.0, float(ref.abs().max())))


def assert_same_rows(got, ref, rows, name, tol=1e-6):
    import torch

    if rows is not None:
        got, ref = got[rows.expand(got.shape)], ref[rows.expand(ref.shape)]
    finite = torch.isfinite(ref)
    assert torch.equal(finite, torch.isfinite(got)), name
    assert float((got[finite] - ref[finite]).abs().max()) <= tol, name


def test_a_scripts_check_is_the_engines():
    """Max abs error, non-finite outputs and the tolerance rule, over the real rows."""
    import torch

    config = CONFIGS["bf16-gqa-window-bias-padded"]
    m = load(config)
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn((2, 4, 64, 8), generator=gen)
    rows = FORWARD_PASS.rows(config, "cpu")["O"]
    for got in (ref + 1e-3, ref + 1.0, ref.clone().index_fill_(2, torch.tensor([3]), float("nan")),
                ref.clone().index_fill_(2, torch.tensor([40]), float("nan"))):  # fmt: skip
        ours = compare(got, ref, 0.02, 0.016, rows)
        theirs = m.check(got, ref, 0.02, 0.016, rows)
        assert theirs["max_abs"] == pytest.approx(ours.max_abs, abs=1e-7)
        assert theirs["passed"] == ours.passed


def test_without_a_gpu_the_script_says_so_in_one_line_and_exits_1(tmp_path):
    path = tmp_path / "repro.py"
    path.write_text(script(SdpaConfig()))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script runs")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "no CUDA GPU" in proc.stderr, proc.stderr


def test_an_option_the_operation_has_no_keyword_for_makes_a_script_that_says_so():
    """The frontend drops an unknown keyword without a word: the script refuses in the tool's words."""
    m = load(CONFIGS["fp8-train"].replace(alibi=True))
    with pytest.raises(SystemExit, match="sdpa_fp8_backward has no option for ALiBi"):
        m.backward_graph(None)


# ---- main() on the CPU, the GPU's parts stood in for ----------------------------------------------


def fake_executor(config: SdpaConfig, mask, wrong: bool = False):
    """A stand-in for a built plan on the CPU: one execution writes what the graph should, in its
    storage (packed tokens packed, E4M3 outputs by their scale, with their amax), computed by the
    engine's own reference; `wrong` writes nothing (the outputs stay NaN)."""
    import torch

    from tui.engine import fp8
    from tui.engine.recipes import real_parts
    from tui.engine.reference import reference_fp32, reference_grads, softmax_rows
    from tui.engine.storage import pack

    def write(data, name, value):
        if data[name].element_size() == 1:
            data[f"amax_{name.lower()}"].fill_(float(value.abs().max()))
            value = value * data[fp8.OUTPUT_SCALES[name]]
        if config.packed:  # a buffer with an input recipe's fill holds more than the real tokens
            value = pack(torch, config, value, name)
        data[name][: len(value)].copy_(value)

    def executor(graph, tensors, data, handle, **_):
        def run():
            if wrong:
                return
            q, k, v = (logical_of(config, data, n) for n in "qkv")
            bias, sink = data.get("bias"), data.get("sink_token")
            d_o = logical_of(config, data, "dO") if "dQ" in tensors else None
            q, k, v, bias, d_o = real_parts(config, q, k, v, bias, d_o)  # a kernel never reads the fill
            if "dQ" not in tensors:
                write(data, "o", reference_fp32(config, q, k, v, bias, mask, sink=sink))
                top, total = softmax_rows(config, q, k, bias, sink)
                for name, t in (("stats", top + total.log()), ("score_max", top), ("score_sum_exp", total)):
                    if name in data:
                        data[name].copy_(t)
                return
            grads = reference_grads(config, q, k, v, d_o, bias, mask, sink=sink)
            for name, grad in zip(("dQ", "dK", "dV"), grads[:3], strict=True):
                write(data, name, grad)
            if sink is not None:
                data["dSink_token"].copy_(grads[3])
            if "amax_dp" in data:
                data["amax_dp"].fill_(1.0)

        return run

    return executor


def dry_run(config: SdpaConfig, monkeypatch, capsys, wrong: bool = False) -> tuple[int, dict]:
    """main() of a script on the CPU: its own code throughout, with the GPU's parts stood in for
    (no handle, an execute() that writes the engine's reference, a fixed kernel time)."""
    import json

    import cudnn
    import torch

    m = load(config)
    mask = dropout_mask(config) if config.dropout else None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "CPU stand-in")
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(cudnn, "create_handle", lambda: None)
    monkeypatch.setattr(cudnn, "set_stream", lambda *_: None)
    monkeypatch.setattr(m, "executor", fake_executor(config, mask, wrong))
    monkeypatch.setattr(m, "kernel_us", lambda run, handle: 10.0)
    monkeypatch.setattr(m, "dropout_mask", lambda handle, data: mask, raising=False)
    monkeypatch.setattr(sys, "argv", ["repro.py"])
    with pytest.raises(SystemExit) as exit_code:
        m.main()
    out = capsys.readouterr().out.splitlines()
    return exit_code.value.code, json.loads(out[-1].removeprefix("RESULT "))


@pytest.mark.parametrize("config", CASES, ids=IDS)
def test_a_scripts_main_checks_every_output_the_engine_checks_and_ends_with_its_result(
    config, monkeypatch, capsys
):
    code, figures = dry_run(config, monkeypatch, capsys)
    expected = {
        **FORWARD_PASS.output_keys(config),
        **(BACKWARD_PASS.output_keys(config) if config.backward else {}),
    }
    assert figures["checks"].keys() == expected.keys()
    assert code == 0 and figures["passed"], figures
    assert figures["kernel_us"] == 10.0 and ("backward_kernel_us" in figures) == config.backward


@pytest.mark.parametrize(
    "config", [CASES[0], CONFIGS["fp8"], CONFIGS["train-thd-sink"]], ids=["fp16", "fp8", "train"]
)
def test_a_script_fails_an_output_its_graph_never_wrote(config, monkeypatch, capsys):
    code, figures = dry_run(config, monkeypatch, capsys, wrong=True)
    assert code == 1 and not figures["passed"]
    assert not any(c["passed"] for c in figures["checks"].values())


# mostly padding, and a group of 8 query heads a key head: dK's stored-O floor binds, and the
# drawn padding holds a larger |q| (4.34) than the real tokens (4.09)
PACKED_GROUP = shape(2, 8, 1, 64, 64, 16, 16, dtype="bf16", layout="THD", backward=True, seq_lens_q=(56, 10),
                     seq_lens_kv=(56, 10))  # fmt: skip


@pytest.mark.parametrize("inputs", ["normal", "pad:nan"])
def test_a_packed_scripts_gradient_atols_are_the_engines(inputs, monkeypatch, capsys):
    """dQ's and dK's floors read max |q| and |k| of the real tokens, as the engine's check (whose
    logical tensors are unpacked: zero past each real length), not of the drawn padding (the
    H200's packed-thd-training script: a dK atol 4.7% above the engine's)."""
    import torch

    from tui.engine.recipes import real_parts
    from tui.engine.reference import reference_fp32, reference_grads

    config = PACKED_GROUP.replace(inputs=inputs)
    _, figures = dry_run(config, monkeypatch, capsys)
    data = device_tensors(config, "cpu", 0)
    data = backward_tensors(config, data, "cpu", 0)
    q, k, v, d_o = (logical_of(config, data, n) for n in ("q", "k", "v", "dO"))
    q, k, v, _bias, d_o = real_parts(config, q, k, v, None, d_o)
    sink = data.get("sink_token")
    o = reference_fp32(config, q, k, v, sink=sink).to(torch.bfloat16)  # O as the forward stored it
    grads = reference_grads(config, q, k, v, d_o, sink=sink)
    checked = Inputs(q, k, v, None, d_o, None, sink, o)
    for out, ref in zip(("dQ", "dK", "dV"), grads[:3], strict=True):
        atol, _ = BACKWARD_PASS.tolerance(config, out, ref, checked)
        assert figures["checks"][out]["atol"] == pytest.approx(atol, rel=1e-4), out
