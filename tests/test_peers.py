"""The field of peers on the CPU: each adapter computes the configuration's attention (its masks,
GQA, bias and ALiBi its own way) as the fp32 reference does; FlashAttention-3 and FlashInfer
through fake modules (FlashInfer's own: test_peer_flashinfer.py); names, refusals and the report."""

from __future__ import annotations

import dataclasses
import types

import pytest
from click.testing import CliRunner

from tui.engine import peers
from tui.engine.peers import ADAPTERS, PEER_KEYS, Tensors, mask_mod, parse_peers, score_mod
from tui.engine.reference import make_inputs, reference_fp32
from tui.engine.runner import RunOptions
from tui.model.config import SdpaConfig
from tui.model.results import ErrorMetrics, OutputCheck, PassResult, PeerResult, RunResult, TimingStats
from tui.present.format import peer_speedup, peer_standing

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

BASE = SdpaConfig(b=2, h_q=4, h_kv=4, s_q=48, s_kv=48, d_qk=32, d_v=32, dtype="fp32", causal="none")
CASES = {
    "plain": BASE,
    "causal": BASE.replace(causal="top_left"),
    "bottom-right, unequal": BASE.replace(causal="bottom_right", s_q=20),
    "top-left, unequal": BASE.replace(causal="top_left", s_kv=64),
    "GQA": BASE.replace(h_kv=2, causal="top_left"),
    "window": BASE.replace(causal="top_left", window=9),
    "padding": BASE.replace(causal="bottom_right", seq_lens_q=(30, 48), seq_lens_kv=(40, 20)),
    "bias": BASE.replace(bias="bxh"),
    "ALiBi": BASE.replace(alibi=True, causal="top_left"),
}


def tensors(config: SdpaConfig) -> Tensors:
    q, k, v, bias = make_inputs(config, "cpu", seed=3)
    return Tensors(q, k, v, bias)


def max_error(config: SdpaConfig, out, t: Tensors) -> float:
    import torch

    ref = reference_fp32(config, t.q, t.k, t.v, t.bias)
    if config.padded:  # only real query rows are compared, as for cuDNN
        lens = torch.tensor([config.lengths(b)[0] for b in range(config.b)]).view(-1, 1, 1, 1)
        keep = torch.arange(config.s_q).view(1, 1, -1, 1) < lens
        out, ref = out * keep, ref * keep
    return float((out.float() - ref).abs().max())


@pytest.mark.parametrize("case", CASES)
def test_torch_math_computes_the_references_attention(case):
    config = CASES[case]
    t = tensors(config)
    out = ADAPTERS["math"].prepare(config, t).run()
    assert out.shape == config.o_dims
    assert max_error(config, out, t) < 1e-5


@pytest.mark.parametrize(
    "case", ["causal", "bottom-right, unequal", "GQA", "window", "padding", "ALiBi", "bias"]
)
def test_flex_masks_and_score_mods_are_the_references(case):
    """Flex's mask_mod and score_mod, run eagerly on the CPU (the GPU compiles the same mods)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    config = CASES[case]
    t = tensors(config)
    keep = mask_mod(config, "cpu")
    block = create_block_mask(keep, config.b, None, config.s_q, config.s_kv, device="cpu") if keep else None
    gqa = {"enable_gqa": True} if config.h_q != config.h_kv else {}
    out = flex_attention(
        t.q, t.k, t.v, score_mod=score_mod(config, t), block_mask=block, scale=config.scale, **gqa
    )
    assert max_error(config, out, t) < 1e-5


def fake_fa3(calls: list):
    """flash_attn_interface's flash_attn_func, computed by torch on BSHD tensors with FlashAttention's
    conventions: causal aligned bottom-right, window_size=(left, right), (out, lse) returned."""
    import torch
    import torch.nn.functional as F

    def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1)):
        calls.append(dict(shape=tuple(q.shape), causal=causal, window=window_size))
        qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
        s_q, s_kv = qh.shape[2], kh.shape[2]
        i = torch.arange(s_q).view(-1, 1) + (s_kv - s_q)
        j = torch.arange(s_kv).view(1, -1)
        keep = torch.ones(s_q, s_kv, dtype=torch.bool)
        if causal:
            keep &= j <= i
        if window_size[0] >= 0:
            keep &= j >= i - window_size[0]
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=keep, scale=softmax_scale, enable_gqa=True)
        return out.transpose(1, 2), None

    return types.SimpleNamespace(flash_attn_func=flash_attn_func)


def test_flashattention3_through_a_fake_module(monkeypatch):
    calls: list = []
    monkeypatch.setattr(peers, "_module", lambda name: fake_fa3(calls))
    fa3 = ADAPTERS["fa3"]
    assert fa3.unavailable() == ""
    for case in ("plain", "causal", "bottom-right, unequal", "GQA", "window"):
        config = CASES[case]
        t = tensors(config)
        assert fa3.refusal(config) == ""
        out = fa3.prepare(config, t).run()
        assert max_error(config, out, t) < 1e-5, case
    assert calls[-1]["window"] == (8, 0) and calls[-1]["shape"] == (2, 48, 4, 32)  # BSHD, left window - 1
    assert "bottom-right" in fa3.refusal(CASES["top-left, unequal"])
    assert "padding" in fa3.refusal(CASES["padding"])
    assert "dropout" in fa3.refusal(BASE.replace(dropout=0.1))


def test_an_optional_peer_that_is_not_installed_says_so(monkeypatch):
    def missing(name):
        raise ImportError(name)

    monkeypatch.setattr(peers, "_module", missing)
    assert ADAPTERS["fa3"].unavailable() == "flash_attn_interface is not installed (FlashAttention-3)"


def test_names_lists_and_refusals():
    assert parse_peers("all") == PEER_KEYS
    assert parse_peers("flex, FLASH") == ("flash", "flex")  # the field's order
    with pytest.raises(ValueError, match="unknown peer nope"):
        parse_peers("flash,nope")
    fp8 = SdpaConfig(dtype="fp8_e4m3")
    assert ADAPTERS["flash"].name(fp8) == "torch FLASH fp16"  # torch has no FP8 attention
    assert ADAPTERS["flex"].name(SdpaConfig(dtype="bf16")) == "Flex bf16"
    assert RunOptions(peers=("flash", "nope")).problems()[0].field == "peers"
    assert RunOptions.from_dict(RunOptions(peers=("flex",)).to_dict()).peers == ("flex",)
    huge = SdpaConfig(b=8, h_q=32, h_kv=32, s_q=8192, s_kv=8192, alibi=True, causal="top_left")
    with pytest.raises(peers.Refused, match="explicit mask of 32.0 GiB, more than 2 GiB"):
        peers.explicit_mask(
            huge, Tensors(*make_inputs(SdpaConfig(b=1, h_q=1, h_kv=1, s_q=1, s_kv=1), "cpu")[:3])
        )


def test_the_cli_names_a_bad_peer_on_one_line():
    from tui.cli.main import main

    out = CliRunner().invoke(main, ["run", "--peers", "flash,[/x]"])
    assert out.exit_code == 2 and out.output.strip().startswith("Error: --peers: unknown peer [/x]")
    assert len(out.output.strip().splitlines()) == 1


def timed(us: float) -> TimingStats:
    return TimingStats(us, us, us, us, us, 0.0, 20, 10, False, regime="burst")


def test_peers_round_trip_and_the_report_says_where_cudnn_stands():
    from rich.console import Console

    from tui.present.report import result_renderable

    error = ErrorMetrics(9.7e-4, 1e-3, 2e-5, 0, 100)
    p = PassResult(
        "forward",
        timing=timed(100.0),
        checks=(OutputCheck("O", 1e-3, 1e-3, error, {"torch FLASH bf16": error}),),
        field_peers=(
            PeerResult("torch FLASH bf16", "FlashAttention-2 in torch", timing=timed(194.0), tflops=320.0),
            PeerResult("Flex bf16", "FlexAttention", timing=timed(157.0), tflops=395.0, compile_seconds=6.5),
            PeerResult("torch EFFICIENT bf16", reason="No available kernel"),
        ),
    )
    assert peer_speedup(p, p.field_peers[0]) == pytest.approx(1.94)
    assert peer_standing(p) == "cuDNN 1.94x FLASH, 1.57x Flex"
    result = RunResult(config=SdpaConfig(dtype="bf16"), status="ok", passes=(p,))
    assert RunResult.from_json(result.to_json()) == result
    console = Console(width=160, record=True)
    console.print(result_renderable(result))
    text = console.export_text()
    assert "against peers: cuDNN 1.94x FLASH, 1.57x Flex" in text
    assert "6.5 s" in text and "No available kernel" in text and "1.94x" in text
    # a file of schema 2.2 (no field_peers) still reads
    old = dataclasses.replace(result, passes=(dataclasses.replace(p, field_peers=()),))
    assert RunResult.from_json(old.to_json().replace('"field_peers": [], ', "")).passes[0].field_peers == ()


def test_the_csv_has_a_row_a_peer_after_the_plans():
    """`run --save-csv` and the dashboard's CSV export carry every peer the H200 recording timed."""
    import csv
    import io

    from fakes import PEERS

    from tui.present.export import render

    rows = list(csv.DictReader(io.StringIO(render("csv", PEERS))))
    peers = [r for r in rows if r["engine_id"] == "peer"]
    assert [r["plan_name"] for r in peers] == [p.name for p in PEERS.forward.field_peers]
    flash = next(r for r in peers if r["plan_name"] == "torch FLASH bf16")
    assert float(flash["kernel_median_us"]) == pytest.approx(
        PEERS.forward.field_peers[0].timing.median_us, abs=1e-3
    )
    assert flash["matches"] == "True" and flash["built"] == "True" and flash["regime"] == "burst"
    efficient = next(r for r in peers if r["plan_name"].startswith("torch EFFICIENT"))
    assert efficient["built"] == "False" and "num_heads" in efficient["build_error"]
    assert len(rows) == len(PEERS.forward.plans) + len(peers)


@pytest.mark.parametrize("case", ["causal", "GQA", "window", "ALiBi"])
def test_a_peers_backward_gives_the_references_gradients(case):
    """dQ, dK, dV of a peer for the same dO, through autograd on the CPU (the GPU times the same
    calls); GQA's dK and dV come back per kv head, as cuDNN writes them."""
    import torch

    from tui.engine.reference import reference_grads

    config = CASES[case].replace(backward=True)
    t = tensors(config)
    d_o = torch.randn(config.o_dims, generator=torch.Generator().manual_seed(5))
    got = ADAPTERS["math"].prepare_backward(config, t, d_o).run()
    want = dict(zip(("dQ", "dK", "dV"), reference_grads(config, t.q, t.k, t.v, d_o, t.bias), strict=True))
    for name, ref in want.items():
        assert got[name].shape == ref.shape, name
        assert float((got[name] - ref).abs().max()) < 1e-4, name
    again = ADAPTERS["math"].prepare_backward(config, t, d_o).run()["dQ"]  # a call repeats, not accumulates
    assert torch.equal(again, got["dQ"])
    padded = CASES["padding"].replace(backward=True)
    assert "NaN" in ADAPTERS["flash"].refusal(padded, "backward")
    assert "backward is not driven" in ADAPTERS["fa3"].refusal(config, "backward")


def test_a_backward_peers_error_is_its_worst_output_in_the_report_and_the_csv():
    import csv
    import io

    from rich.console import Console

    from tui.present.export import render
    from tui.present.report import result_renderable

    good, bad = ErrorMetrics(1e-3, 1e-3, 1e-4, 0, 100), ErrorMetrics(2e-4, 1e-3, 1e-5, 3, 100)
    name = "torch FLASH bf16"
    backward = PassResult(
        "backward",
        timing=timed(300.0),
        checks=tuple(
            OutputCheck(o, 1e-3, 1e-3, good, {name: m}) for o, m in (("dQ", good), ("dK", bad), ("dV", good))
        ),
        field_peers=(PeerResult(name, "FlashAttention-2 in torch", timing=timed(600.0), tflops=100.0),),
    )
    result = RunResult(config=SdpaConfig(dtype="bf16", backward=True), status="ok", passes=(backward,))
    console = Console(width=200, record=True)
    console.print(result_renderable(result))
    text = console.export_text()
    assert "max abs dQ/dK/dV" in text and "2.00e-04" in text  # dK: outside its tolerance, so the worst
    (row,) = [r for r in csv.DictReader(io.StringIO(render("csv", result))) if r["engine_id"] == "peer"]
    assert row["matches"] == "False" and float(row["max_abs_error"]) == pytest.approx(2e-4)


def test_measuring_peers_checks_each_against_the_reference_and_figures_its_tflops(monkeypatch):
    """peer_runs on the CPU, with the GPU's two steps (a waited execution, CUPTI timing) scripted:
    each peer's output against the pass's reference and tolerance, TFLOPS and bandwidth from its
    kernel time, a refusal in one line."""
    from tui.engine import faults, peer_runs
    from tui.engine.passes import FORWARD_PASS, Inputs

    config = CASES["GQA"]
    t = tensors(config)
    ref = reference_fp32(config, t.q, t.k, t.v)
    built = types.SimpleNamespace(reference={"O": ref}, tolerances={"O": (1e-4, 1e-4)})
    m = types.SimpleNamespace(
        config=config,
        spec=FORWARD_PASS,
        built=built,
        bench=types.SimpleNamespace(progress=lambda _t: None, l2_bytes=None, gpu=None),
        inputs=lambda: Inputs(t.q, t.k, t.v),
    )
    monkeypatch.setattr(faults, "execute_once", lambda run, _during, _plan="": run())
    monkeypatch.setattr(peer_runs, "kernel_time", lambda *_a, **_k: timed(50.0))
    results, errors = peer_runs.measure_peers(m, ("math", "fa3"), RunOptions(), 10**9, 10**6)
    math_peer, fa3 = results
    assert math_peer.ran and errors["O"][math_peer.name].passed
    assert math_peer.tflops == pytest.approx(20.0) and math_peer.bandwidth_gbs == pytest.approx(20.0)
    assert not fa3.ran and fa3.name not in errors["O"]
