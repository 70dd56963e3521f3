"""The backward pass and FP8 without a GPU: config rules, graph keywords, the autograd
reference on hand-checked tensors, quantisation, and the CPU engine's answer."""

import json
import re

import pytest
import torch
from click.testing import CliRunner

from tui.cli.main import main
from tui.engine import reference as refmod
from tui.engine.fp8 import FP8_MAX, dequantise, quantise
from tui.engine.graph import define_and_validate
from tui.engine.keywords import OP_KEYWORDS, op_name, sdpa_kwargs
from tui.engine.reference import make_inputs, random_d_o, reference_fp32, reference_grads
from tui.engine.tolerances import tolerance
from tui.model.config import SdpaConfig
from tui.model.fields import config_from_dict
from tui.model.results import RunResult
from tui.model.validation import validate

TINY = SdpaConfig(b=2, h_q=4, h_kv=2, s_q=24, s_kv=40, d_qk=16, d_v=8, causal="bottom_right", dtype="fp16")


# ---- configuration ------------------------------------------------------------------------
def test_deterministic_needs_the_backward():
    errors = validate(SdpaConfig(deterministic=True))
    assert [e.field for e in errors] == ["deterministic"]
    assert validate(SdpaConfig(deterministic=True, backward=True)) == []


def test_only_fp8_inputs_choose_their_output_dtype():
    assert [e.field for e in validate(SdpaConfig(out_dtype="bf16"))] == ["out_dtype"]
    assert validate(SdpaConfig(out_dtype="fp16")) == []  # the same as the inputs': allowed
    assert validate(SdpaConfig(dtype="fp8_e4m3", out_dtype="bf16")) == []
    assert [e.field for e in validate(SdpaConfig(out_dtype="fp32"))] == ["out_dtype"]


def test_fp8_is_read_from_short_names_and_counts_one_byte():
    c = config_from_dict({"dtype": "FP8", "backward": True})
    assert c.dtype == "fp8_e4m3" and c.fp8 and c.o_dtype == "fp8_e4m3"
    assert c.io_bytes() * 2 == SdpaConfig(backward=True).io_bytes()
    assert "+bwd" in c.label() and "fp8_e4m3" in c.label()


def test_backward_flops_are_two_and_a_half_forwards():
    c = SdpaConfig(backward=True)
    assert c.backward_flops() == int(2.5 * c.flops())
    assert c.memory_estimate() > c.replace(backward=False).memory_estimate()


# ---- graph keywords ------------------------------------------------------------------------
def _binding_keywords(op: str) -> set[str]:
    import cudnn

    doc = getattr(cudnn._pybind_module.backend_graph, op).__doc__
    signature = doc.split(")", 1)[0] if doc.startswith(f"{op}(") else doc.split("\n", 1)[0]
    return set(re.findall(r"(\w+):", signature))


@pytest.mark.parametrize("op", sorted(OP_KEYWORDS))
def test_every_operation_keyword_exists_in_the_binding(op):
    known = _binding_keywords(op)
    assert {"q", "k", "v"} <= known
    assert OP_KEYWORDS[op] <= known, OP_KEYWORDS[op] - known


@pytest.mark.parametrize(
    "config",
    [
        SdpaConfig(backward=True, deterministic=True, window=64, alibi=True, dropout=0.1),
        SdpaConfig(dtype="fp8_e4m3", backward=True, window=64),
        SdpaConfig(dtype="fp8_e4m3", causal="none"),
    ],
    ids=["bf16-everything", "fp8-window", "fp8-plain"],
)
def test_keywords_of_each_operation_are_declared(config):
    for backward in (False, True):
        op = op_name(config, backward)
        kw = sdpa_kwargs(config, op=op)
        assert set(kw) <= OP_KEYWORDS[op]
    assert ("left_bound" in sdpa_kwargs(config, op=op_name(config))) == (config.fp8 and bool(config.window))


def test_backward_graph_carries_the_forward_masks_and_the_deterministic_flag():
    config = SdpaConfig(backward=True, deterministic=True, window=128)
    fwd = json.loads(define_and_validate(config).json())["nodes"][0]
    bwd = json.loads(define_and_validate(config, backward=True).json())["nodes"][0]
    assert fwd["params"].get("generate_stats") is True or "stats" in json.dumps(fwd).lower()
    text = json.dumps(bwd).lower()
    assert "determin" in text and "128" in text


def test_an_option_the_operation_lacks_is_refused_by_name():
    r = _cpu_engine().run(
        SdpaConfig(b=1, h_q=2, h_kv=2, s_q=64, s_kv=64, dtype="fp8_e4m3", backward=True, alibi=True)
    )
    assert r.status == "unsupported"
    assert r.message == "backward: define: sdpa_fp8_backward has no option for ALiBi"
    assert r.forward.checks  # the forward's CPU check still ran


# ---- the autograd reference ------------------------------------------------------------------
def test_reference_gradients_by_hand():
    """s_q=1, s_kv=2, d=1, scale 1, q=0: p=(1/2, 1/2), o=(v0+v1)/2. With dO=1: dV=p=(1/2, 1/2);
    dS = p*(dO*v - o) = ((v0-v1)/4, (v1-v0)/4); dQ = dS.k = (v0-v1)/4*(k0-k1); dK = dS*q = 0."""
    c = SdpaConfig(
        b=1, h_q=1, h_kv=1, s_q=1, s_kv=2, d_qk=1, d_v=1, causal="none", attn_scale=1.0, layout="BHSD"
    )
    q = torch.zeros(1, 1, 1, 1)
    k = torch.tensor([2.0, -1.0]).view(1, 1, 2, 1)
    v = torch.tensor([1.0, 3.0]).view(1, 1, 2, 1)
    dq, dk, dv = reference_grads(c, q, k, v, torch.ones(1, 1, 1, 1))
    assert dq.item() == pytest.approx((1 - 3) / 4 * (2 - -1))
    assert dk.abs().max().item() == 0
    assert dv.flatten().tolist() == pytest.approx([0.5, 0.5])


def test_chunked_gradients_equal_whole_autograd_with_gqa_and_padding(monkeypatch):
    config = TINY.replace(seq_lens_q=(24, 10), seq_lens_kv=(40, 12))
    q, k, v, _ = make_inputs(config, "cpu", 3)
    d_o = random_d_o(config, "cpu", 4)
    whole = reference_grads(config, q, k, v, d_o)
    monkeypatch.setattr(refmod, "REFERENCE_CHUNK_BYTES", 40 * 4 * 5)  # 5 rows of one head per step
    chunked = reference_grads(config, q, k, v, d_o)
    for a, b in zip(whole, chunked, strict=True):
        assert torch.isfinite(b).all()
        assert torch.allclose(a, b, atol=1e-6)
    # padded query rows pass no gradient; keys past a real length get none
    assert whole[0][1, :, 10:].abs().max() == 0 and whole[1][1, :, 12:].abs().max() == 0


def test_reference_gradients_match_plain_autograd():
    config = TINY
    q, k, v, _ = make_inputs(config, "cpu", 0)
    d_o = random_d_o(config, "cpu", 1)
    qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
    scores = qf @ kf.repeat_interleave(2, 1).transpose(-1, -2) * config.scale
    i, j = torch.arange(24).view(-1, 1), torch.arange(40).view(1, -1)
    o = torch.softmax(scores.masked_fill(j > i + 16, float("-inf")), -1) @ vf.repeat_interleave(2, 1)
    o.backward(d_o.float())
    assert torch.allclose(o, reference_fp32(config, q, k, v), atol=1e-6)
    for got, want in zip(reference_grads(config, q, k, v, d_o), (qf.grad, kf.grad, vf.grad), strict=True):
        assert torch.allclose(got, want, atol=1e-5)


def test_gradient_tolerance_scales_with_the_gradient():
    ref = torch.tensor([0.5, -8.0])
    atol, rtol = tolerance(SdpaConfig(dtype="bf16"), ref, grad=True)
    assert atol == pytest.approx(8.0 * 2**-5) and rtol == 2**-4
    assert tolerance(SdpaConfig(dtype="fp16"), ref) == (5e-3, 3e-3)  # the forward's stays absolute


# ---- FP8 quantisation -------------------------------------------------------------------------
def test_quantise_uses_the_whole_e4m3_range_and_dequantises_back():
    x = torch.randn(4, 8, 64, 16, generator=torch.Generator().manual_seed(0))
    x8, descale = quantise(x)
    assert x8.dtype == torch.float8_e4m3fn
    assert x8.float().abs().max().item() == FP8_MAX
    back = dequantise(x8, descale)
    assert descale == pytest.approx(x.abs().max().item() / FP8_MAX)
    normal = x.abs() / descale >= 2**-6  # E4M3's normal range: relative error at most half a step
    assert ((back - x).abs()[normal] <= (x.abs() * 2**-4)[normal] + 1e-7).all()


def test_fp8_inputs_are_fp32_before_quantisation():
    q, k, v, _ = make_inputs(SdpaConfig(dtype="fp8_e4m3", b=1, h_q=2, h_kv=2, s_q=8, s_kv=8), "cpu", 0)
    assert q.dtype == torch.float32


# ---- the engine on the CPU ------------------------------------------------------------------------
def _cpu_engine():
    from tui.engine.runner import Engine
    from tui.model.results import Environment

    return Engine(environment=Environment(gpu_available=False, unavailable_reason="test: CPU mode"))


def test_cpu_engine_validates_the_backward_and_checks_torch_gradients():
    config = SdpaConfig(b=1, h_q=4, h_kv=2, s_q=128, s_kv=128, backward=True, deterministic=True)
    r = _cpu_engine().run(config)
    assert r.status == "cpu_only"
    b = r.pass_of("backward")
    assert b.status == "cpu_only" and [p.name for p in b.phases] == ["define", "validate"]
    assert "sdpa_backward" in b.graph_json
    assert [c.output for c in b.checks] == ["dQ", "dK", "dV"]
    assert all(c.cudnn is None and c.peers["torch FLASH fp16"].mismatched == 0 for c in b.checks)
    assert b.flops == config.backward_flops() and b.deterministic
    assert RunResult.from_json(r.to_json()) == r


def test_cli_flags_reach_the_config_and_bad_combinations_name_the_option(monkeypatch):
    from fakes import FakeEngine, computed

    from tui.cli import common as cli
    from tui.process.session import EngineSession

    engine = _cpu_engine()  # answered in this process, as the engine process would answer
    fake = FakeEngine(computed(engine), environment=engine.environment())
    monkeypatch.setattr(cli, "engine_session", lambda: EngineSession(fake))
    runner = CliRunner()
    out = runner.invoke(
        main,
        [
            "run",
            "--b",
            "1",
            "--h",
            "2",
            "--s",
            "64",
            "--backward",
            "--deterministic",
            "--json",
            "--no-autotune",
        ],
    )
    assert out.exit_code in (0, 1), out.output
    data = json.loads(out.output)
    assert data["config"]["backward"] is True and data["passes"][1]["deterministic"] is True
    bad = runner.invoke(main, ["run", "--deterministic"])
    assert bad.exit_code == 2 and "--deterministic" in bad.output
    bad = runner.invoke(main, ["run", "--out-dtype", "bf16"])
    assert bad.exit_code == 2 and "--out-dtype" in bad.output


def test_a_long_reference_reports_its_progress(monkeypatch):
    """The engine process counts silence as a hang: the reference says how far it is."""
    config = TINY.replace(backward=True)
    q, k, v, _ = make_inputs(config, "cpu", 0)
    d_o = random_d_o(config, "cpu", 1)
    monkeypatch.setattr(
        refmod, "REFERENCE_CHUNK_BYTES", 40 * 4 * 6
    )  # 6 rows of one head: 2 * 4 * 4 = 32 blocks
    clock = iter(range(0, 10_000, 2))  # every block looks 2 s long
    monkeypatch.setattr(refmod.time, "perf_counter", lambda: next(clock))
    shares: list[float] = []
    reference_grads(config, q, k, v, d_o, progress=shares.append)
    assert len(shares) == 32 and shares == sorted(shares) and shares[-1] == 1.0
