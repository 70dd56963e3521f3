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
        SdpaConfig(b=1, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"),
        SdpaConfig(layout="SBHD", causal="none", d_qk=192, d_v=128, heuristics=("B",), attn_scale=0.1),
        SdpaConfig(b=2, window=256, seq_lens_q=(1024, 77), seq_lens_kv=(1024, 300), alibi=True, bias="bxh",
                   implementation="unified", dropout=0.1, dropout_seed=7),
    ],
)
def test_script_compiles_and_carries_the_configuration(config):
    text = script(config)
    compile(text, "repro.py", "exec")
    c = config
    assert f"B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = {c.b}, {c.h_q}, {c.h_kv}, {c.s_q}, {c.s_kv}, {c.d_qk}, {c.d_v}" in text
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
        end = text.index("def allocate(dims):")
        exec(text[text.index("LAYOUT, MEMORY_ORDER"):text.index("\n", text.index("LAYOUT, MEMORY_ORDER"))], namespace)
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


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(b=2, h_q=4, h_kv=2, s_q=48, s_kv=64, d_qk=16, d_v=8, causal="bottom_right", layout="SBHD"),
        SdpaConfig(b=2, h_q=4, h_kv=2, s_q=64, s_kv=64, d_qk=16, d_v=16, window=9, seq_lens_q=(64, 20),
                   seq_lens_kv=(64, 33), alibi=True, bias="bx1"),
        SdpaConfig(b=1, h_q=2, h_kv=2, s_q=32, s_kv=32, d_qk=16, d_v=16, dropout=0.25),
    ],
    ids=["causal-br", "all-masks", "dropout"],
)
def test_script_inputs_and_reference_are_the_engines(config):
    """Run the script's own input and reference code on the CPU: same inputs as the engine
    (same seed and order), and a reference that agrees with the engine's."""
    import torch

    from tui.engine.reference import make_inputs, reference_fp32, valid_rows

    text = script(config).replace('"cuda"', '"cpu"')
    head = text[text.index("B, H_Q, H_KV"):text.index("handle = cudnn.create_handle()")]
    head += "dropout_mask = None\n"
    body = text[text.index("def alibi_slopes(h):"):text.index("def kernel_time_us(")]
    ns: dict = {"torch": torch, "cudnn": __import__("cudnn"), "math": __import__("math")}
    exec(head, ns)
    q, k, v, bias = make_inputs(config, "cpu", 0)
    assert torch.equal(ns["q"], q) and torch.equal(ns["v"], v)
    assert (bias is None and ns["bias"] is None) or torch.equal(ns["bias"], bias)
    mask = None
    if config.dropout:
        mask = (torch.rand(config.b, config.h_q, config.s_q, config.s_kv, generator=torch.Generator().manual_seed(3))
                > config.dropout).float()
        ns["dropout_mask"] = mask
    ns["o"] = reference_fp32(config, q, k, v, bias, mask).to(q.dtype)  # stands in for cuDNN's output
    exec(body, ns)
    ours = reference_fp32(config, q, k, v, bias, mask)
    rows = valid_rows(config, "cpu")
    rows = rows.expand(config.o_dims) if rows is not None else torch.ones(config.o_dims, dtype=torch.bool)
    assert torch.allclose(ns["ref"][rows], ours[rows], atol=1e-5)
    assert ns["passed"]

