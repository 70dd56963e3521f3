import csv
import io
from pathlib import Path

import pytest

from tui.engine.config import SdpaConfig
from tui.engine.results import RunResult
from tui.export import PLAN_COLUMNS, default_filename, render, script

RECORDED = RunResult.from_json((Path(__file__).parent / "data" / "seed_h200.json").read_text())


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(),
        SdpaConfig(b=1, h_q=32, h_kv=8, s_q=1, s_kv=8192, d_qk=128, d_v=128, dtype="bf16", causal="bottom_right"),
        SdpaConfig(layout="SBHD", causal="none", d_qk=192, d_v=128, heuristics=("B",), attn_scale=0.1),
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
    assert ("use_causal_mask=True" in text) == (c.causal == "top_left")
    assert ("use_causal_mask_bottom_right=True" in text) == (c.causal == "bottom_right")
    assert "permute(0, 2, 1, 3)" not in text  # the seed's mistake
    imports = {line.split()[1] for line in text.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"json", "statistics", "sys", "cudnn", "torch", "torch.profiler"}


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


def test_json_export_round_trips():
    assert RunResult.from_json(render("json", RECORDED)) == RECORDED


def test_csv_export_has_every_plan_and_the_environment():
    rows = list(csv.DictReader(io.StringIO(render("csv", RECORDED))))
    assert len(rows) == len(RECORDED.plans)
    assert set(PLAN_COLUMNS) <= set(rows[0])
    assert all(r["gpu_name"] == "NVIDIA H200" and r["cudnn_backend_version"] == "9.19.0" for r in rows)
    heuristic = [r for r in rows if r["heuristic_pick"] == "True"]
    assert len(heuristic) == 1 and float(heuristic[0]["kernel_median_us"]) > 0
    assert rows[0]["schema_version"] == RECORDED.schema_version


def test_default_filenames_are_safe():
    name = default_filename(SdpaConfig(h_q=32, h_kv=8), "script")
    assert name.endswith(".py") and "/" not in name and " " not in name
    with pytest.raises(ValueError):
        render("pdf", RECORDED)
