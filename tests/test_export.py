import csv
import io
from pathlib import Path

import pytest

from tui.engine.config import SdpaConfig
from tui.engine.results import SCHEMA_VERSION, RunResult
from tui.export import PLAN_COLUMNS, default_filename, render, script

RECORDED = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(),
        SdpaConfig(
            b=1, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"
        ),
        SdpaConfig(layout="SBHD", causal="none", d_qk=192, d_v=128, heuristics=("B",), attn_scale=0.1),
        SdpaConfig(
            b=2,
            window=256,
            seq_lens_q=(1024, 77),
            seq_lens_kv=(1024, 300),
            alibi=True,
            bias="bxh",
            implementation="unified",
            dropout=0.1,
            dropout_seed=7,
        ),
    ],
)
def test_script_compiles_and_carries_the_configuration(config):
    text = script(config)
    compile(text, "repro.py", "exec")
    c = config
    assert (
        f"B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = {c.b}, {c.h_q}, {c.h_kv}, {c.s_q}, {c.s_kv}, {c.d_qk}, {c.d_v}"
        in text
    )
    assert f'LAYOUT, MEMORY_ORDER = "{c.layout}"' in text
    assert f"ATTN_SCALE = {c.scale!r}" in text
    assert ", ".join(f"cudnn.heur_mode.{m}" for m in c.heuristics) in text
    assert f'CAUSAL = "{c.causal}"' in text
    assert "permute(0, 2, 1, 3)" not in text  # the seed's mistake
    imports = {line.split()[1] for line in text.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"json", "math", "statistics", "sys", "cudnn", "torch", "torch.profiler"}


def test_script_strides_and_reference_agree_with_the_engine():
    """Run the script's own helpers on the CPU: its strides are the engine's."""
    from tui.engine.layouts import strides

    for layout in ("BSHD", "BHSD", "SBHD"):
        text = script(SdpaConfig(layout=layout))
        namespace: dict = {}
        start = text.index("def strides(dims):")
        end = text.index("def allocate(dims")
        exec(
            text[text.index("LAYOUT, MEMORY_ORDER") : text.index("\n", text.index("LAYOUT, MEMORY_ORDER"))],
            namespace,
        )
        exec(text[start:end], namespace)
        assert namespace["strides"]((2, 3, 5, 8)) == strides((2, 3, 5, 8), layout)


def test_script_carries_the_masks():
    c = SdpaConfig(b=2, window=256, seq_lens_q=(1024, 77), seq_lens_kv=(1024, 300), alibi=True, bias="bx1")
    text = script(c)
    assert "WINDOW = 256" in text and "SEQ_LENS_Q, SEQ_LENS_KV = [1024, 77], [1024, 300]" in text
    assert "ALIBI = True" in text and "BIAS_DIMS = (2, 1, 1024, 1024)" in text


def test_json_export_round_trips():
    assert RunResult.from_json(render("json", RECORDED)) == RECORDED


def test_csv_export_has_every_plan_and_the_environment():
    rows = list(csv.DictReader(io.StringIO(render("csv", RECORDED))))
    assert len(rows) == len(RECORDED.plans)
    assert set(PLAN_COLUMNS) <= set(rows[0])
    assert all(r["gpu_name"] == "NVIDIA H200" and r["cudnn_backend_version"] == "9.19.0" for r in rows)
    heuristic = [r for r in rows if r["heuristic_pick"] == "True"]
    assert len(heuristic) == 1 and float(heuristic[0]["kernel_median_us"]) > 0
    assert rows[0]["schema_version"] == SCHEMA_VERSION and {r["pass"] for r in rows} == {"forward"}


def test_default_filenames_are_safe():
    name = default_filename(SdpaConfig(h_q=32, h_kv=8), "script")
    assert name.endswith(".py") and "/" not in name and " " not in name
    with pytest.raises(ValueError):
        render("pdf", RECORDED)


def cpu_namespace(config, dropout_mask=None):
    """Run the script's pure-torch part on the CPU (its constants, inputs and reference functions,
    everything before it touches cuDNN) and return its globals."""
    import torch

    text = script(config).replace('"cuda"', '"cpu"')
    head = text[text.index("B, H_Q, H_KV") : text.index("# ---- cuDNN")]
    ns: dict = {"torch": torch, "cudnn": __import__("cudnn"), "math": __import__("math")}
    exec(head, ns)
    ns["dropout_mask"] = dropout_mask
    return ns


def cpu_dropout_mask(config):
    import torch

    if not config.dropout:
        return None
    gen = torch.Generator().manual_seed(3)
    return (torch.rand(config.b, config.h_q, config.s_q, config.s_kv, generator=gen) > config.dropout).float()


def engine_inputs(config):
    """The engine's q, k, v, bias and dO for seed 0, as the values its graphs compute with
    (FP8: quantised per tensor, then dequantised), and the E4M3 tensors themselves."""
    from tui.engine.reference import dequantise, make_inputs, quantise, random_like

    q, k, v, bias = make_inputs(config, "cpu", 0)
    d_o = random_like(config, config.o_dims, "cpu", 1)
    if not config.fp8:
        return (q, k, v, bias, d_o), (q, k, v, d_o)
    stored = [quantise(x) for x in (q, k, v, d_o)]
    values = [dequantise(x8, descale) for x8, descale in stored]
    return (*values[:3], bias, values[3]), tuple(x8 for x8, _ in stored)


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(b=2, h_q=4, h_kv=2, s_q=48, s_kv=64, d_qk=16, d_v=8, causal="bottom_right", layout="SBHD"),
        SdpaConfig(
            b=2,
            h_q=4,
            h_kv=2,
            s_q=64,
            s_kv=64,
            d_qk=16,
            d_v=16,
            window=9,
            seq_lens_q=(64, 20),
            seq_lens_kv=(64, 33),
            alibi=True,
            bias="bx1",
        ),
        SdpaConfig(b=1, h_q=2, h_kv=2, s_q=32, s_kv=32, d_qk=16, d_v=16, dropout=0.25),
        SdpaConfig(
            b=2,
            h_q=4,
            h_kv=2,
            s_q=32,
            s_kv=48,
            d_qk=16,
            d_v=16,
            dtype="fp8_e4m3",
            causal="top_left",
            layout="BHSD",
        ),
    ],
    ids=["causal-br", "all-masks", "dropout", "fp8"],
)
def test_script_inputs_and_reference_are_the_engines(config):
    """Run the script's own input and reference code on the CPU: same inputs as the engine
    (same seed and order; FP8: the same E4M3 bytes), and a reference that agrees with the engine's."""
    import torch

    from tui.engine.reference import reference_fp32, tolerance, valid_rows

    mask = cpu_dropout_mask(config)
    ns = cpu_namespace(config, mask)
    (q, k, v, bias, _), stored = engine_inputs(config)
    for name, ours in zip("qkv", stored, strict=False):
        assert ns[name].dtype == ours.dtype and ns[name].stride() == ours.stride()
        assert torch.equal(
            ns[name].view(torch.uint8) if config.fp8 else ns[name],
            ours.view(torch.uint8) if config.fp8 else ours,
        )
    assert (bias is None and ns["bias"] is None) or torch.equal(ns["bias"], bias)
    ref = ns["reference"]()
    ours = reference_fp32(config, q, k, v, bias, mask)
    rows = valid_rows(config, "cpu")
    rows = rows.expand(config.o_dims) if rows is not None else torch.ones(config.o_dims, dtype=torch.bool)
    assert torch.allclose(ref[rows], ours[rows], atol=1e-5)
    # the script's own check passes an output equal to the engine's reference, and fails a wrong one
    atol, rtol = tolerance(config, ours)
    real = ns["real_rows"](ns["lens_q"], config.s_q, config.o_dims)
    assert ns["compare"](ours, ref, real, atol, rtol)[1]
    assert not ns["compare"](ours + 4 * atol, ref, real, atol, rtol)[1]


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(b=2, h_q=4, h_kv=2, s_q=32, s_kv=48, d_qk=16, d_v=8, causal="bottom_right", backward=True),
        SdpaConfig(
            b=2,
            h_q=4,
            h_kv=4,
            s_q=64,
            s_kv=64,
            d_qk=16,
            d_v=16,
            window=9,
            seq_lens_q=(64, 20),
            seq_lens_kv=(64, 33),
            alibi=True,
            bias="bxh",
            dropout=0.2,
            backward=True,
            layout="SBHD",
        ),
        SdpaConfig(
            b=1,
            h_q=4,
            h_kv=1,
            s_q=40,
            s_kv=40,
            d_qk=16,
            d_v=16,
            dtype="fp8_e4m3",
            backward=True,
            deterministic=True,
        ),
    ],
    ids=["gqa-causal-br", "padding-dropout-bias-alibi", "fp8-mqa"],
)
def test_script_gradient_reference_is_the_engines(config):
    """The script's fp32 autograd (whole-row blocks, per head) against the engine's chunked
    reference_grads on the same dequantised inputs and the same dO."""
    import torch

    from tui.engine.reference import reference_grads, valid_rows

    mask = cpu_dropout_mask(config)
    ns = cpu_namespace(config, mask)
    (q, k, v, bias, d_o), stored = engine_inputs(config)
    assert ns["dO"].dtype == stored[3].dtype and ns["dO"].stride() == stored[3].stride()
    assert torch.equal(ns["dO"].float(), stored[3].float())
    theirs = ns["reference_grads"]()
    ours = reference_grads(config, q, k, v, d_o, bias, mask)
    for name, t, o, side in zip(("dQ", "dK", "dV"), theirs, ours, (0, 1, 1), strict=True):
        rows = valid_rows(config, "cpu", side)
        rows = rows.expand(o.shape) if rows is not None else torch.ones(o.shape, dtype=torch.bool)
        assert t.shape == o.shape, name
        assert torch.allclose(t[rows], o[rows], atol=1e-5, rtol=1e-4), name
        assert float(o.abs().max()) > 0, name


FP8 = SdpaConfig(b=2, h_q=8, h_kv=8, s_q=512, s_kv=512, d_qk=128, d_v=128, dtype="fp8_e4m3", causal="none")
TRAIN = SdpaConfig(b=2, h_q=8, h_kv=2, s_q=512, s_kv=512, d_qk=128, d_v=128, dtype="bf16", backward=True)


def test_fp8_script_uses_sdpa_fp8_with_its_scales():
    text = script(FP8)
    compile(text, "repro.py", "exec")
    assert "graph.sdpa_fp8(" in text and "graph.sdpa(" not in text
    assert "DTYPE, IO_TYPE = torch.float8_e4m3fn, cudnn.data_type.FP8_E4M3" in text
    for name in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o", "amax_o"):
        assert f'"{name}"' in text, name
    assert "quantise(q)" in text and "delayed_scaling(graph, pack, workspace" in text
    assert (
        "ATOL * max(float(ref.abs().max()), 1e-30)" in text
    )  # FP8's atol is a share of the reference's range
    assert "ATOL, RTOL = 0.0625, 0.125" in text
    assert "result.update(amax_o=amax_o, reference_max_abs=reference_max" in text
    assert "sdpa_backward" not in text and "dO" not in text  # no training code in a forward script
    assert '"left_bound"' in script(FP8.replace(window=128)) and "diagonal_band_left_bound" not in script(
        FP8.replace(window=128)
    )


def test_fp8_script_with_a_16_bit_output_has_no_delayed_scaling_of_o():
    text = script(FP8.replace(out_dtype="bf16"))
    compile(text, "repro.py", "exec")
    assert "O_DTYPE, O_TYPE = torch.bfloat16, cudnn.data_type.BFLOAT16" in text
    assert "delayed_scaling" not in text and "o_values = o.float()\n" in text
    assert "delayed_scaling(bwd_graph" in script(FP8.replace(out_dtype="bf16", backward=True))


def test_training_script_has_the_backward():
    text = script(TRAIN)
    compile(text, "repro.py", "exec")
    assert "generate_stats=True" in text and "stats_t.set_output(True)" in text
    assert "graph.sdpa_backward(" in text and "sdpa_fp8" not in text
    assert "use_deterministic_algorithm=True" not in text and "DETERMINISTIC = False" in text
    assert "GRAD_ATOL, GRAD_RTOL = 0.03125, 0.0625" in text
    assert "reference_grads()" in text and "torch.autograd.grad(" in text
    assert "backward_kernel_us = kernel_time_us(bwd_graph, bwd_pack, bwd_workspace)" in text
    for key in ("backward_kernel_us=", "grad_max_abs_error=", "grad_passed=", "bitwise_repeatable="):
        assert key in text, key
    assert f"backward_flops = {TRAIN.backward_flops()}" in text
    forward = script(TRAIN.replace(backward=False))
    assert "generate_stats=False" in forward and "backward" not in forward.lower().replace("backward-", "")


def test_deterministic_training_script_asks_for_the_deterministic_algorithm():
    for config in (TRAIN, FP8):
        text = script(config.replace(backward=True, deterministic=True))
        compile(text, "repro.py", "exec")
        assert text.count("use_deterministic_algorithm=True") == 1
        assert "DETERMINISTIC = True" in text


def test_fp8_training_script_uses_sdpa_fp8_backward_with_its_scales():
    text = script(FP8.replace(backward=True))
    compile(text, "repro.py", "exec")
    assert "graph.sdpa_fp8(" in text and "graph.sdpa_fp8_backward(" in text and "generate_stats=True" in text
    for name in (
        "descale_o",
        "descale_dO",
        "descale_dP",
        "scale_dQ",
        "scale_dK",
        "scale_dV",
        "scale_dP",
        "amax_dQ",
        "amax_dK",
        "amax_dV",
        "amax_dP",
    ):
        assert f'"{name}"' in text, name
    assert "dO, descale_dO = quantise(dO)" in text
    assert "GRAD_ATOL, GRAD_RTOL = 0.125, 0.25" in text
    assert "grad_amax=grad_amax" in text


def test_training_script_with_every_option_carries_them_to_both_graphs():
    config = TRAIN.replace(
        dropout=0.1,
        dropout_seed=9,
        seq_lens_q=(512, 100),
        seq_lens_kv=(512, 300),
        bias="1xh",
        window=64,
        h_kv=8,
    )
    text = script(config)
    compile(text, "repro.py", "exec")
    assert "DROPOUT, DROPOUT_SEED = 0.1, 9" in text and "BIAS_DIMS = (1, 8, 512, 512)" in text
    assert text.count("options = mask_options(graph, pack)") == 2  # the forward and the backward
    assert "make_graph(dropout_mask)" in text  # the mask cuDNN draws, for the reference
    assert "real_rows(lens, s, want.shape)" in text  # padded rows of dQ, dK, dV are not compared


def test_fp8_backward_refuses_what_sdpa_fp8_backward_cannot_say():
    """The frontend drops an unknown keyword without a word: the script says so instead."""
    text = script(FP8.replace(backward=True, alibi=True))
    compile(text, "repro.py", "exec")
    assert 'sys.exit("sdpa_fp8_backward has no option for ALiBi' in text
    assert "has no option" not in script(FP8.replace(backward=True))


@pytest.mark.parametrize(
    "dtype,out_dtype",
    [("fp16", "auto"), ("bf16", "auto"), ("fp8_e4m3", "auto"), ("fp8_e4m3", "fp16"), ("fp8_e4m3", "bf16")],
)
@pytest.mark.parametrize("backward,deterministic", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "dropout": 0.1,
            "seq_lens_q": (64, 9),
            "seq_lens_kv": (64, 30),
            "bias": "bxh",
            "alibi": True,
            "window": 8,
            "implementation": "unified",
        },
    ],
)
def test_every_variant_compiles_and_keeps_no_tags(dtype, out_dtype, backward, deterministic, options):
    config = SdpaConfig(
        b=2,
        h_q=4,
        h_kv=2,
        s_q=64,
        s_kv=64,
        d_qk=64,
        d_v=64,
        dtype=dtype,
        out_dtype=out_dtype,
        backward=backward,
        deterministic=deterministic,
        **options,
    )
    assert config.validate() == []
    text = script(config)
    compile(text, "repro.py", "exec")
    assert not any(line.startswith("%") for line in text.splitlines())
    assert "{" + "}" not in text.replace("{}", "")  # nothing left unformatted
    imports = {line.split()[1] for line in text.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"json", "math", "statistics", "sys", "cudnn", "torch", "torch.profiler"}


@pytest.mark.gpu
@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(
            b=2, h_q=16, h_kv=16, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="fp8_e4m3", causal="none"
        ),
        SdpaConfig(
            b=2,
            h_q=8,
            h_kv=8,
            s_q=1024,
            s_kv=1024,
            d_qk=128,
            d_v=128,
            dtype="fp8_e4m3",
            window=256,
            seq_lens_q=(1024, 300),
            seq_lens_kv=(1024, 700),
            layout="BHSD",
        ),
        SdpaConfig(b=2, h_q=16, h_kv=4, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16", backward=True),
        SdpaConfig(
            b=2,
            h_q=8,
            h_kv=8,
            s_q=512,
            s_kv=512,
            d_qk=64,
            d_v=64,
            backward=True,
            deterministic=True,
            dropout=0.1,
            dropout_seed=5,
            seq_lens_q=(512, 100),
            seq_lens_kv=(512, 300),
            bias="1xh",
        ),
        SdpaConfig(
            b=2,
            h_q=8,
            h_kv=8,
            s_q=1024,
            s_kv=1024,
            d_qk=128,
            d_v=128,
            dtype="fp8_e4m3",
            backward=True,
            deterministic=True,
        ),
    ],
    ids=[
        "fp8",
        "fp8-window-padding",
        "bf16-train-gqa",
        "fp16-train-det-dropout-padding-bias",
        "fp8-train-det",
    ],
)
def test_exported_fp8_and_training_scripts_run_and_agree_with_the_engine(tmp_path, config):
    """Same seed, same logical inputs, same recipe, same plan: the script's errors are the engine's
    (gradients up to the order of a non-deterministic accumulation), and so are its kernel times."""
    from exported import assert_script_agrees

    from tui.engine.runner import Engine, RunOptions

    r = Engine(cache_size=1).run(config, RunOptions(autotune=False))
    assert r.status == "ok", r.message
    figures = assert_script_agrees(tmp_path, r)
    if config.fp8:
        assert figures["amax_o"] == pytest.approx(r.fp8.amax["amax_o"], rel=1e-3)
        assert figures["reference_max_abs"] == pytest.approx(r.fp8.reference_amax["amax_o"], rel=1e-4)
    if config.backward:
        b = r.backward
        assert figures["deterministic"] == config.deterministic
        for name in ("dQ", "dK", "dV"):
            assert figures["grad_max_abs_error"][name] == pytest.approx(
                b.gradients[name].max_abs, rel=1e-2
            ), name
            assert figures["grad_atol"][name] == pytest.approx(b.atol[name], rel=1e-4), name
        if config.deterministic:
            assert figures["bitwise_repeatable"] and b.bitwise_repeatable
