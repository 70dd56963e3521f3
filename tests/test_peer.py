"""The peer: torch's SDPA forced to a backend other than cuDNN (FLASH, then EFFICIENT, then MATH),
named by the backend that ran; on the CPU, with refusals forced through a fake sdpa_kernel."""

import contextlib
import types
import warnings

import pytest
import torch
import torch.nn.attention

from tui.engine import reference
from tui.engine.cpu import cpu_inputs
from tui.engine.measure import Bench, Measurement
from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, NO_PEER_NOTE, BuiltPass, Inputs
from tui.engine.peer import (
    PEER_BACKENDS,
    SDP_BACKENDS,
    first_backend,
    forced,
    refusal_reason,
    torch_sdpa,
    torch_sdpa_grads,
)
from tui.engine.reference import reference_fp32, reference_grads
from tui.engine.tolerances import compare, tolerance
from tui.model.config import SdpaConfig

GQA = SdpaConfig(b=1, h_q=4, h_kv=2, s_q=64, s_kv=64, d_qk=32, d_v=32)
FLASH_SAYS = (
    "Flash attention kernel not used because: (Triggered internally at sdp_utils.cpp:101.)",
    "Flash attention does not support non-null attn_mask. (Triggered internally at sdp_utils.cpp:270.)",
)


class FakeSdpaKernel:
    """torch.nn.attention.sdpa_kernel that records each backend forced and refuses those in
    `refuse` the way torch does: UserWarnings saying why, then "No available kernel"."""

    def __init__(self, refuse: set[str]):
        self.refuse, self.forced = refuse, []
        self.real = torch.nn.attention.sdpa_kernel

    @contextlib.contextmanager
    def __call__(self, backend):
        self.forced.append(backend.name)
        if backend.name in self.refuse:
            for said in FLASH_SAYS:
                warnings.warn(said, UserWarning, stacklevel=2)
            raise RuntimeError("No available kernel. Aborting execution.")
        with self.real(backend):
            yield


@pytest.fixture
def refusing(monkeypatch):
    """Install a FakeSdpaKernel refusing the given SDPBackend names."""

    def install(*names: str) -> FakeSdpaKernel:
        fake = FakeSdpaKernel(set(names))
        monkeypatch.setattr(torch.nn.attention, "sdpa_kernel", fake)
        return fake

    return install


def test_the_order_is_flash_efficient_math_and_cudnn_is_never_asked_for():
    assert PEER_BACKENDS == ("FLASH", "EFFICIENT", "MATH")
    assert "CUDNN_ATTENTION" not in SDP_BACKENDS.values() and "CUDNN" not in SDP_BACKENDS
    with pytest.raises(ValueError, match="never cuDNN"):
        forced("CUDNN")
    q, k, v, _ = reference.make_inputs(GQA, "cpu", seed=0)
    with pytest.raises(ValueError):  # not a refusal to step past: a request the peer never makes
        first_backend(lambda b: torch_sdpa(GQA, q, k, v, backend=b), ("CUDNN",))


def test_first_backend_steps_past_refusals_in_order_and_keeps_torchs_reasons_silently():
    tried = []

    def run(backend):
        tried.append(backend)
        if backend != "MATH":
            for said in FLASH_SAYS:
                warnings.warn(said, UserWarning, stacklevel=2)
            raise RuntimeError("No available kernel. Aborting execution.")
        return "out"

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        run_ = first_backend(run)
    assert shown == []  # torch's warnings while probing are not shown
    assert tried == ["FLASH", "EFFICIENT", "MATH"] and (run_.backend, run_.outputs) == ("MATH", "out")
    reason = "Flash attention does not support non-null attn_mask"
    assert run_.refused == (("FLASH", reason), ("EFFICIENT", reason))
    assert first_backend(lambda b: b).backend == "FLASH"  # the first that runs, and no other
    nothing = first_backend(run, ("FLASH",))
    assert (nothing.backend, nothing.outputs) == ("", None)


def test_out_of_memory_and_cuda_errors_are_not_refusals():
    def crash(message):
        def run(backend):
            raise RuntimeError(message)

        return run

    with pytest.raises(RuntimeError, match="illegal memory access"):
        first_backend(crash("CUDA error: an illegal memory access was encountered"))

    def oom(backend):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    with pytest.raises(torch.cuda.OutOfMemoryError):
        first_backend(oom)


def test_refusal_reason_is_torchs_first_sentence():
    assert refusal_reason(list(FLASH_SAYS), RuntimeError("x")) == (
        "Flash attention does not support non-null attn_mask"
    )
    assert (
        refusal_reason([], RuntimeError("No available kernel. Aborting execution.")) == "No available kernel"
    )
    on_cuda = [  # forcing FLASH, torch also says that the backends it was not to use are off
        "Memory efficient kernel not used because: (Triggered internally at sdp_utils.cpp:900.)",
        "Memory Efficient attention has been runtime disabled. (Triggered internally at sdp_utils.cpp:600.)",
        *FLASH_SAYS,
    ]
    assert refusal_reason(on_cuda, RuntimeError("x")) == "Flash attention does not support non-null attn_mask"


def test_forward_peer_names_the_backend_that_ran_and_never_forces_cudnn(refusing):
    inputs = cpu_inputs(GQA, seed=0)
    fake = refusing()
    peer = FORWARD_PASS.peer(GQA, inputs)
    assert fake.forced == ["FLASH_ATTENTION"]  # FLASH runs this on the CPU: nothing else is tried
    assert peer.name == "torch FLASH fp16" and peer.notes == ()
    assert "forced to its FLASH backend" in peer.description and "never cuDNN" in peer.description
    assert "K and V repeated to the 4 query heads" in peer.description

    fake = refusing("FLASH_ATTENTION", "EFFICIENT_ATTENTION")
    peer = FORWARD_PASS.peer(GQA, inputs)
    assert fake.forced == ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH"]
    assert peer.name == "torch MATH fp16"
    assert "FLASH refused: Flash attention does not support non-null attn_mask" in peer.description
    ref = reference_fp32(GQA, *(t.float() for t in (inputs.q, inputs.k, inputs.v)))
    assert compare(peer.outputs["O"], ref, *tolerance(GQA, ref)).mismatched == 0


def test_backward_peer_falls_back_the_same_way_under_autograd(refusing):
    config = GQA.replace(backward=True, dtype="bf16")
    inputs = cpu_inputs(config, seed=0)
    fake = refusing("FLASH_ATTENTION")
    peer = BACKWARD_PASS.peer(config, inputs)
    assert fake.forced == ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH"]  # no EFFICIENT on the CPU
    assert peer.name == "torch MATH bf16" and peer.description.startswith(
        "torch SDPA backward forced to its MATH"
    )
    refs = reference_grads(config, *(t.float() for t in (inputs.q, inputs.k, inputs.v, inputs.d_o)))
    for name, ref in zip(("dQ", "dK", "dV"), refs, strict=True):
        assert peer.outputs[name].shape == ref.shape
        assert compare(peer.outputs[name], ref, *tolerance(config, ref, grad=True)).mismatched == 0


def test_no_backend_runs_no_peer_and_one_note(refusing):
    fake = refusing("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
    peer = FORWARD_PASS.peer(GQA, cpu_inputs(GQA, seed=0))
    assert "CUDNN_ATTENTION" not in fake.forced
    assert peer.outputs is None and peer.name == ""
    (note,) = peer.notes
    assert note.startswith(NO_PEER_NOTE + " (FLASH: ") and "\n" not in note


def test_no_backend_runs_on_the_cpu_engine(refusing, cpu_engine):
    refusing("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
    fwd = cpu_engine.run(GQA).forward
    assert fwd.status == "cpu_only" and fwd.checks == () and fwd.peers == {}
    assert fwd.notes[0].startswith("CPU only") and fwd.notes[1].startswith(NO_PEER_NOTE)


def test_the_cpu_engine_names_its_peer_by_backend(cpu_engine):
    fwd = cpu_engine.run(GQA.replace(d_v=16)).forward  # FLASH needs d_qk == d_v: MATH runs
    (check,) = fwd.checks
    assert (
        set(check.peers) == set(fwd.peers) == {"torch MATH fp16"}
        and check.peers["torch MATH fp16"].mismatched == 0
    )
    assert "torch's MATH fp16 forward on the CPU is checked instead" in fwd.notes[0]
    assert (
        "FLASH refused: Flash attention requires q,k,v to have the same last dimension"
        in fwd.peers["torch MATH fp16"]
    )


def test_no_peer_by_design_is_none():
    config = GQA.replace(backward=True)
    inputs = cpu_inputs(config, seed=0)
    mask = torch.ones(config.b, config.h_q, config.s_q, config.s_kv)
    dropped = Inputs(inputs.q, inputs.k, inputs.v, None, inputs.d_o, mask)
    assert FORWARD_PASS.peer(config, dropped) is None and BACKWARD_PASS.peer(config, dropped) is None
    padded = config.replace(seq_lens_q=(40,), seq_lens_kv=(50,))
    assert BACKWARD_PASS.peer(padded, cpu_inputs(padded, seed=0)) is None
    with pytest.raises(ValueError, match="padding"):
        torch_sdpa_grads(padded, inputs.q, inputs.k, inputs.v, inputs.d_o)


def _built(config: SdpaConfig) -> tuple[BuiltPass, Bench]:
    inputs = cpu_inputs(config, seed=0)
    graph = types.SimpleNamespace(config=config)
    bench = Bench(handle=None, set_stream=lambda s: None, l2_bytes=None, progress=lambda s: None)
    return BuiltPass("forward", graph, {"q": inputs.q, "k": inputs.k, "v": inputs.v}, None), bench


def test_prepare_check_keys_the_peers_error_by_the_name_it_ran_under(refusing):
    built, bench = _built(GQA)
    refusing("FLASH_ATTENTION")
    Measurement(FORWARD_PASS, built, {}, bench).prepare_check()
    assert set(built.peer_metrics["O"]) == set(built.peers) == {"torch MATH fp16"}
    assert built.peer_metrics["O"]["torch MATH fp16"].mismatched == 0 and built.peer_notes == ()

    built, bench = _built(GQA)
    refusing("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
    Measurement(FORWARD_PASS, built, {}, bench).prepare_check()
    assert built.peer_metrics == {} and built.peers == {}
    assert len(built.peer_notes) == 1 and built.peer_notes[0].startswith(NO_PEER_NOTE)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"causal": "none"},
        {"causal": "bottom_right", "s_q": 40},
        {"causal": "bottom_right", "s_q": 1},
        {"window": 8},
        {"bias": "1xh"},
    ],
    ids=["causal", "none", "br", "decode-br", "window", "bias"],
)
@pytest.mark.parametrize("backend", ["FLASH", "MATH"])
def test_each_backend_computes_the_same_attention(changes, backend):
    """GQA expanded, plain and explicit masks, MATH a block of rows at a time: each matches fp32."""
    config = GQA.replace(**changes)
    q, k, v, bias = reference.make_inputs(config, "cpu", seed=4)
    ref = reference_fp32(config, q.float(), k.float(), v.float(), bias)
    out = torch_sdpa(config, q, k, v, bias, backend)
    assert compare(out, ref, *tolerance(config, ref)).mismatched == 0
