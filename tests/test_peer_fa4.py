"""The FlashAttention-4 peer on the CPU, against a fake `flash_attn.cute`: which fields it takes,
the exact keywords of each call (GQA, both causal alignments, a window, sinks, packed tokens,
a page table), its refusals, its compile kept out of timing, its backward's gradients checked
(a wrong dK fails), and the row where it is not installed.

The fake keeps flash-attn-4 4.0.0b36's conventions, read from its interface.py: (b, s, h, d) or
packed (tokens, h, d) tensors, causal masks and windows aligned to the end of the keys
(k <= q + (s_k - s_q) + right, k >= q + (s_k - s_q) - left), window_size (left, right) with None
for unbounded, the sink a logit per query head, a page pool (pages, page size, h_kv, d) read
through page_table up to seqused_k, (out, lse) returned, and a compile the first time a shape is
called. It computes in fp32 with torch, so autograd gives its backward. A mask_mod (prefix-LM,
documents) is called as FA4 calls it, (batch, head, q_idx, kv_idx, seqlen_info, aux_tensors), on
torch index tensors: the mask it gives replaces causal and the window, as FA4's does."""

from __future__ import annotations

import types

import pytest

from tui.engine import faults, peer_base, peer_fa4, peer_runs
from tui.engine.passes import BACKWARD_PASS, FORWARD_PASS, Inputs
from tui.engine.peer_base import Refused, Tensors
from tui.engine.peers import ADAPTERS
from tui.engine.reference import make_inputs, reference_fp32, reference_grads, valid_rows
from tui.engine.runner import RunOptions
from tui.engine.tolerances import compare
from tui.model.config import SdpaConfig
from tui.model.results import TimingStats

# the keywords of flash-attn-4 4.0.0b36's two entry points (interface.py), besides q, k, v
KEYWORDS = {
    "flash_attn_func": {
        "qv", "gather_kv_indices", "softmax_scale", "causal", "window_size", "learnable_sink", "softcap",
        "num_splits", "pack_gqa", "deterministic", "score_mod", "score_mod_bwd", "mask_mod", "aux_tensors",
        "aux_scalars", "block_sparse_tensors", "block_sparse_tensors_bwd", "return_lse",
        "gather_bwd_recompute_p", "gather_bwd_token_chunk",
    },
    "flash_attn_varlen_func": {
        "qv", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "min_seqlen_k", "seqused_q",
        "seqused_k", "gather_kv_indices", "page_table", "softmax_scale", "causal", "window_size",
        "learnable_sink", "softcap", "num_splits", "pack_gqa", "deterministic", "score_mod", "score_mod_bwd",
        "mask_mod", "block_sparse_tensors", "aux_tensors", "aux_scalars", "return_lse", "scheduler_metadata",
        "seqlen_k_per_split", "disable_scheduler_metadata", "gather_bwd_recompute_p", "gather_bwd_token_chunk",
    },
}  # fmt: skip

BASE = SdpaConfig(b=2, h_q=4, h_kv=4, s_q=40, s_kv=40, d_qk=32, d_v=32, dtype="fp32", causal="none")
LENGTHS = dict(seq_lens_q=(25, 40), seq_lens_kv=(33, 17))
CASES = {
    "plain": BASE,
    "GQA": BASE.replace(h_kv=2, causal="top_left"),
    "MQA": BASE.replace(h_kv=1),
    "top-left, equal": BASE.replace(causal="top_left"),
    "bottom-right, unequal": BASE.replace(causal="bottom_right", s_q=16),
    "decode": BASE.replace(causal="bottom_right", s_q=1, h_kv=2),
    "window, causal": BASE.replace(causal="bottom_right", window=7, s_q=24),
    "window, no mask": BASE.replace(window=7),
    "sinks": BASE.replace(sink=True, causal="top_left"),
    "padding": BASE.replace(causal="bottom_right", **LENGTHS),
    "THD": BASE.replace(layout="THD", causal="bottom_right", h_kv=2, **LENGTHS),
    "paged": BASE.replace(page_size=8, causal="bottom_right", s_q=1, seq_lens_kv=(33, 17)),
    "paged prefill": BASE.replace(page_size=16, causal="bottom_right", h_kv=2, **LENGTHS),
    "softcap": BASE.replace(variant="softcap:1.5", h_kv=2),
    "softcap, causal and a window": BASE.replace(variant="softcap-causal:1.5,9"),
    "prefix-LM": BASE.replace(variant="prefix-lm:13", h_kv=2),
    "documents": BASE.replace(variant="document:9,20,11"),
}


def torch_dsl():
    """FA4's CuTe DSL as torch: no compile, a constant as a tensor, an aux tensor read at indices."""
    import torch

    return peer_fa4.Dsl(lambda f: f, lambda n: torch.tensor(n, dtype=torch.int32), lambda t, i: t[i.long()])


class FakeFA4:
    """flash_attn.cute's two entry points, as 4.0.0b36 behaves; `wrong_dk` scales dK by 1.5
    (its forward unchanged), `refuse` raises FA4's assertion for a head dim above 256."""

    def __init__(self, wrong_dk: bool = False):
        self.calls: list[dict] = []
        self.compiled: set = set()
        self.compiles = 0
        self.wrong_dk = wrong_dk

    def flash_attn_func(self, q, k, v, **kwargs):
        return self._call("flash_attn_func", q, k, v, kwargs)

    def flash_attn_varlen_func(self, q, k, v, **kwargs):
        return self._call("flash_attn_varlen_func", q, k, v, kwargs)

    def _call(self, entry, q, k, v, kwargs):
        import torch

        unknown = set(kwargs) - KEYWORDS[entry]
        if unknown:
            raise TypeError(f"{entry}() got an unexpected keyword argument {unknown.pop()!r}")
        if q.shape[-1] > 256:
            raise AssertionError(
                f"(head_dim, head_dim_v)=({q.shape[-1]}, {v.shape[-1]}) is not supported on SM90."
            )
        for name in ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k", "page_table"):
            assert kwargs.get(name) is None or kwargs[name].dtype == torch.int32, f"{name} must be int32"
        self.calls.append(dict(entry=entry, q=q, k=k, v=v, **kwargs))
        key = (entry, tuple(q.shape), tuple(k.shape), q.requires_grad, tuple(sorted(kwargs)))
        if key not in self.compiled:
            self.compiled.add(key)
            self.compiles += 1
        if self.wrong_dk:
            k = k + 0.5 * (k - k.detach())  # the same forward; dK times 1.5
        out = self._attention(q, k, v, kwargs)
        if kwargs.get("deterministic") and out.requires_grad:

            def refuse(_grad):
                raise AssertionError("deterministic backward not supported on SM 9.0")

            out.register_hook(refuse)
        return out, None

    def _attention(self, q, k, v, kw):
        import torch

        packed = kw.get("cu_seqlens_q") is not None
        b = len(kw["cu_seqlens_q"]) - 1 if packed else q.shape[0]
        outs = []
        for i in range(b):
            if packed:
                lo, hi = (int(x) for x in kw["cu_seqlens_q"][i : i + 2])
                qi = q[lo:hi]
            else:
                qi = q[i]
                if kw.get("seqused_q") is not None:
                    qi = qi[: int(kw["seqused_q"][i])]
            if kw.get("page_table") is not None:
                size = k.shape[1]
                pages = kw["page_table"][i].long()
                ki, vi = (x[pages].flatten(0, 1) for x in (k, v))
                n = int(kw["seqused_k"][i])
                ki, vi = ki[:n], vi[:n]
                assert size * pages.numel() >= n
            elif kw.get("cu_seqlens_k") is not None:
                lo, hi = (int(x) for x in kw["cu_seqlens_k"][i : i + 2])
                ki, vi = k[lo:hi], v[lo:hi]
            else:
                ki, vi = k[i], v[i]
                if kw.get("seqused_k") is not None:
                    n = int(kw["seqused_k"][i])
                    ki, vi = ki[:n], vi[:n]
            o = self._one(qi, ki, vi, kw)
            if not packed and o.shape[0] < q.shape[1]:  # rows past seqused_q: left as zeros
                o = torch.cat([o, o.new_zeros(q.shape[1] - o.shape[0], *o.shape[1:])])
            outs.append(o)
        return torch.cat(outs) if packed else torch.stack(outs)

    def _one(self, q, k, v, kw):
        """softmax over (s_q, h, d) x (s_k, h_kv, d), FA4's masks, in fp32."""
        import torch

        group = q.shape[1] // k.shape[1]
        k, v = (x.repeat_interleave(group, dim=1).float() for x in (k, v))
        scores = torch.einsum("qhd,khd->hqk", q.float(), k) * kw.get("softmax_scale", q.shape[-1] ** -0.5)
        if kw.get("softcap"):  # its score_mod: the scaled scores capped
            scores = kw["softcap"] * torch.tanh(scores / kw["softcap"])
        s_q, s_k = q.shape[0], k.shape[0]
        left, right = kw.get("window_size", (None, None))
        if kw.get("causal"):
            right = 0
        row = torch.arange(s_q).view(-1, 1) + (s_k - s_q)  # aligned to the end of the keys
        col = torch.arange(s_k).view(1, -1)
        keep = torch.ones(s_q, s_k, dtype=torch.bool)
        if right is not None:
            keep &= col <= row + right
        if left is not None:
            keep &= col >= row - left
        if kw.get("mask_mod") is not None:  # FA4 takes it in place of causal and the window
            assert not kw.get("causal") and "window_size" not in kw, "a mask_mod with causal or a window"
            q_idx = torch.arange(s_q, dtype=torch.int32).view(-1, 1)  # its own positions, top-left
            keep = kw["mask_mod"](0, 0, q_idx, col.int(), None, kw.get("aux_tensors")).bool()
            keep = keep.expand(s_q, s_k)
        scores = scores.masked_fill(~keep, float("-inf"))
        sink = kw.get("learnable_sink")
        if sink is not None:
            scores = torch.cat([scores, sink.float().view(-1, 1, 1).expand(-1, s_q, 1)], dim=-1)
        empty = ~torch.isfinite(scores.amax(-1, keepdim=True))
        p = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
        p = p[..., :s_k]
        return torch.einsum("hqk,khd->qhd", p, v).to(q.dtype)


def tensors(config: SdpaConfig) -> Tensors:
    import torch

    q, k, v, bias = make_inputs(config, "cpu", seed=3)
    sink = (
        torch.randn((1, config.h_q, 1, 1), generator=torch.Generator().manual_seed(5))
        if config.sink
        else None
    )
    return Tensors(q, k, v, bias, sink)


def error(config: SdpaConfig, out, t: Tensors) -> float:
    ref = reference_fp32(config, t.q, t.k, t.v, t.bias, sink=t.sink)
    return compare(out, ref, 1e-5, 1e-5, valid_rows(config, "cpu")).max_abs


@pytest.fixture
def fake(monkeypatch) -> FakeFA4:
    module = FakeFA4()
    monkeypatch.setattr(peer_fa4, "_module", lambda: module)
    monkeypatch.setattr(peer_fa4, "_dsl", torch_dsl)
    return module


@pytest.mark.parametrize("case", CASES)
def test_fa4_computes_the_references_attention_for_what_it_takes(fake, case):
    config = CASES[case]
    t = tensors(config)
    fa4 = ADAPTERS["fa4"]
    assert fa4.refusal(config) == "", case
    prepared = fa4.prepare(config, t)
    out = prepared.outputs(prepared.run())
    assert out.shape == config.o_dims
    assert error(config, out, t) < 1e-5, case


def test_the_keywords_of_each_configuration(fake):
    """The exact call per configuration: the entry point, the tensors' shapes, every keyword."""
    fa4 = ADAPTERS["fa4"]

    def called(case):
        config = CASES[case]
        fa4.prepare(config, tensors(config))
        call = dict(fake.calls[-1])
        return call.pop("entry"), call.pop("q"), call.pop("k"), call.pop("v"), call

    scale = BASE.scale
    entry, q, k, _v, kw = called("GQA")
    assert entry == "flash_attn_func" and q.shape == (2, 40, 4, 32) and k.shape == (2, 40, 2, 32)
    assert kw == {"softmax_scale": scale, "causal": True}
    assert called("MQA")[2].shape == (2, 40, 1, 32)
    assert called("plain")[4] == {"softmax_scale": scale, "causal": False}
    assert called("bottom-right, unequal")[4] == {"softmax_scale": scale, "causal": True}
    assert called("window, causal")[4] == {"softmax_scale": scale, "causal": True, "window_size": (6, 0)}
    assert called("window, no mask")[4]["window_size"] == (6, None)
    sink = called("sinks")[4]["learnable_sink"]
    assert sink.shape == (4,) and str(sink.dtype) == "torch.float32" and sink.is_contiguous()
    entry, q, _k, _v, kw = called("padding")
    assert entry == "flash_attn_varlen_func" and q.shape == (2, 40, 4, 32)
    assert kw["seqused_q"].tolist() == [25, 40] and kw["seqused_k"].tolist() == [33, 17]
    assert kw["max_seqlen_q"] == 40 and kw["max_seqlen_k"] == 40
    entry, q, k, _v, kw = called("THD")
    assert entry == "flash_attn_varlen_func" and q.shape == (65, 4, 32) and k.shape == (50, 2, 32)
    assert kw["cu_seqlens_q"].tolist() == [0, 25, 65] and kw["cu_seqlens_k"].tolist() == [0, 33, 50]
    assert kw["max_seqlen_q"] == 40 and kw["max_seqlen_k"] == 33
    assert not {"seqused_q", "seqused_k", "page_table"} & set(kw)
    entry, q, k, _v, kw = called("paged")
    config = CASES["paged"]
    assert entry == "flash_attn_varlen_func" and q.shape == (2, 1, 4, 32)
    assert k.shape == (sum(config.pages_needed()), 8, 4, 32)  # (pages, page size, h_kv, d)
    assert kw["page_table"].shape == (2, config.pages_per_sequence()) and kw["seqused_k"].tolist() == [33, 17]
    assert not {"cu_seqlens_k", "seqused_q"} & set(kw)
    assert called("softcap")[4] == {"softmax_scale": scale, "causal": False, "softcap": 1.5}
    want = {"softmax_scale": scale, "causal": True, "window_size": (8, 0), "softcap": 1.5}
    assert called("softcap, causal and a window")[4] == want
    kw = called("prefix-LM")[4]
    assert set(kw) == {"softmax_scale", "causal", "mask_mod"} and kw["causal"] is False
    entry, _q, _k, _v, kw = called("documents")
    assert entry == "flash_attn_func" and set(kw) == {"softmax_scale", "causal", "mask_mod", "aux_tensors"}
    (ids,) = kw["aux_tensors"]  # each key's document, as FA4 reads an aux tensor: int32, contiguous
    assert str(ids.dtype) == "torch.int32" and ids.is_contiguous()
    assert ids.tolist() == [0] * 9 + [1] * 20 + [2] * 11


def test_fa4s_mask_mods_keep_what_the_variant_keeps():
    """The mask_mod written for FA4, called on every (query, key) pair, keeps exactly the keys the
    variant's own arithmetic says each query keeps (model/variants.py: the Mask pane's)."""
    import torch

    for text in ("prefix-lm:13", "prefix-lm:40", "document:9,20,11", "document:40"):
        config = BASE.replace(variant=text)
        made = peer_fa4.mask_mod(config, "cpu", torch_dsl())
        rows, cols = torch.arange(40).view(-1, 1).int(), torch.arange(40).view(1, -1).int()
        keep = made["mask_mod"](0, 0, rows, cols, None, made.get("aux_tensors")).expand(40, 40)
        for i in range(40):
            first, stop = config.modifier.span(i, 40)
            assert keep[i].nonzero().flatten().tolist() == list(range(first, stop)), (text, i)


def test_the_fields_fa4_cannot_take_each_say_which(fake):
    fa4 = ADAPTERS["fa4"]
    assert fa4.refusal(BASE.replace(alibi=True)) == "FA4 takes no ALiBi"
    assert fa4.refusal(BASE.replace(bias="bxh")) == "FA4 takes no bias"
    assert fa4.refusal(BASE.replace(dropout=0.1)) == "FA4 takes no dropout"
    top_left = fa4.refusal(BASE.replace(causal="top_left", s_kv=64))
    assert top_left.startswith("FA4 aligns causal masks and windows bottom-right") and "top-left" in top_left
    assert "window" in fa4.refusal(BASE.replace(window=7, s_q=24))
    assert "top-left" in fa4.refusal(BASE.replace(causal="top_left", **LENGTHS))  # unequal real lengths
    assert fa4.refusal(CASES["paged"].replace(backward=True), "backward").startswith("FA4 has no backward")
    assert fa4.refusal(CASES["sinks"]) == ""  # FA4 takes sinks: no peer refusal for them
    assert fa4.refusal(BASE.replace(variant="prefix-lm:8")) == ""  # its mask_mod
    assert fa4.refusal(BASE.replace(variant="document:20,20")) == ""
    assert fa4.refusal(BASE.replace(variant="prefix-lm:8", s_q=24)) == ""  # the mask_mod's own alignment
    assert "softcap-causal's top-left" in fa4.refusal(BASE.replace(variant="softcap-causal:2", s_q=24))
    for line in (fa4.refusal(BASE.replace(alibi=True)), top_left):
        assert "\n" not in line


def test_fa4s_own_assertion_is_its_refusal_in_its_words(fake):
    config = BASE.replace(d_qk=512, d_v=512)
    with pytest.raises(
        Refused, match=r"^FA4: \(head_dim, head_dim_v\)=\(512, 512\) is not supported on SM90"
    ):
        ADAPTERS["fa4"].prepare(config, tensors(config))


def test_the_compile_is_kept_out_of_timing(fake, monkeypatch, eager):
    """The first call for a shape compiles while preparing (its time reported apart); the calls
    timed afterwards compile nothing."""
    config = CASES["GQA"]
    prepared = ADAPTERS["fa4"].prepare(config, tensors(config))
    assert fake.compiles == 1 and prepared.compile_seconds is not None and prepared.compile_seconds >= 0
    timed_compiles = []

    def kernel_time(run, *_args, **_kwargs):
        before = fake.compiles
        for _ in range(3):
            run()
        timed_compiles.append(fake.compiles - before)
        return stats(10.0)

    monkeypatch.setattr(peer_runs, "kernel_time", kernel_time)
    results, errors = peer_runs.measure_peers(
        measurement(config, FORWARD_PASS), ("fa4",), RunOptions(), 10**9, 10**6
    )
    (peer,) = results
    assert timed_compiles == [0]
    assert peer.ran and peer.compile_seconds is not None and peer.timing.median_us == 10.0
    assert errors["O"][peer.name].passed


def measurement(config: SdpaConfig, spec, d_o=None, **fake_kwargs):
    """What peer_runs reads of a measurement: the config, the pass, its reference and tolerances."""
    t = tensors(config)
    if spec is FORWARD_PASS:
        reference = {"O": reference_fp32(config, t.q, t.k, t.v, sink=t.sink)}
    else:
        grads = reference_grads(config, t.q, t.k, t.v, d_o, sink=t.sink)
        reference = dict(zip(("dQ", "dK", "dV"), grads[:3], strict=True))
    built = types.SimpleNamespace(reference=reference, tolerances=dict.fromkeys(reference, (1e-4, 1e-4)))
    return types.SimpleNamespace(
        config=config,
        spec=spec,
        built=built,
        bench=types.SimpleNamespace(progress=lambda _t: None, l2_bytes=None, gpu=None),
        inputs=lambda: Inputs(t.q, t.k, t.v, None, d_o, None, t.sink),
    )


def stats(us: float, method: str = "cupti kernel durations over cuda-graph replay") -> TimingStats:
    return TimingStats(us, us, us, us, us, 0.0, 3, 1, False, method=method, regime="burst")


@pytest.fixture
def eager(monkeypatch):
    """The GPU's steps scripted: a waited execution runs; kernel time (CUDA-graph replays, as
    cuDNN's plans are timed) calls three times and says 40 µs; CUPTI over eager calls, 55 µs;
    and there is no device to wait for."""
    import torch

    def graphed(run, *_args, **_kwargs):
        for _ in range(3):
            run()
        return stats(40.0)

    def profiled(run):
        run()
        return 55.0, ()

    monkeypatch.setattr(faults, "execute_once", lambda run, _during, _plan="": run())
    monkeypatch.setattr(peer_runs, "kernel_time", graphed)
    monkeypatch.setattr(peer_runs, "profiler_kernel_time", profiled)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def backward_peers(monkeypatch, config, keys, **fake_kwargs):
    import torch

    monkeypatch.setattr(peer_fa4, "_module", lambda: FakeFA4(**fake_kwargs))
    monkeypatch.setattr(peer_fa4, "_dsl", torch_dsl)
    d_o = torch.randn(config.o_dims, generator=torch.Generator().manual_seed(7))
    return peer_runs.measure_peers(measurement(config, BACKWARD_PASS, d_o), keys, RunOptions(), 10**9, 10**6)


@pytest.mark.parametrize("case", ["GQA", "window, causal", "sinks", "THD", "prefix-LM", "documents"])
def test_the_backward_peers_gradients_are_checked(monkeypatch, eager, case):
    """FA4's and torch FLASH's dQ, dK, dV each against the reference's gradients (where torch's
    refuses padding, it says so). Flex's backward is the same autograd path, compiled: GPU only."""
    config = CASES[case].replace(backward=True)
    results, errors = backward_peers(monkeypatch, config, ("flash", "fa4"))
    by_key = dict(zip(("flash", "fa4"), results, strict=True))
    assert by_key["fa4"].ran, by_key["fa4"].reason
    assert "autograd" in by_key["fa4"].description
    # a backward through autograd failed inside a capture on the H200 (leaving the context erroring):
    # every backward peer is timed by CUPTI over eager calls, and says so
    ran = [p for p in results if p.ran]
    assert all(p.timing.median_us == 55.0 and peer_base.UNCAPTURED in p.timing_method for p in ran)
    if config.varlen:
        assert "NaN" in by_key["flash"].reason
    for output in ("dQ", "dK", "dV"):
        for peer in ran:
            assert errors[output][peer.name].passed, (output, peer.name)


def test_a_backward_peer_with_a_wrong_dk_fails(monkeypatch, eager):
    from tui.model.results import OutputCheck, PassResult
    from tui.present.format import peer_errors

    config = CASES["GQA"].replace(backward=True)
    results, errors = backward_peers(monkeypatch, config, ("fa4",), wrong_dk=True)
    (peer,) = results
    assert peer.ran
    assert errors["dQ"][peer.name].passed and errors["dV"][peer.name].passed
    assert not errors["dK"][peer.name].passed
    checks = tuple(
        OutputCheck(o, 1e-4, 1e-4, errors[o][peer.name], {peer.name: errors[o][peer.name]}) for o in errors
    )
    assert not peer_errors(PassResult("backward", checks=checks, field_peers=results))[peer.name].passed


def test_fa4s_backward_refusal_is_its_own_words(monkeypatch, eager):
    config = CASES["GQA"].replace(backward=True, deterministic=True)
    results, _errors = backward_peers(monkeypatch, config, ("fa4",))
    assert results[0].reason == "FA4: deterministic backward not supported on SM 9.0"


def test_where_fa4_is_not_installed_the_row_says_how_to_get_it(monkeypatch):
    def missing():
        raise ModuleNotFoundError("No module named 'flash_attn'")

    monkeypatch.setattr(peer_fa4, "_module", missing)
    config = CASES["GQA"]
    results, _errors = peer_runs.measure_peers(
        measurement(config, FORWARD_PASS), ("fa4",), RunOptions(), 1, 1
    )
    assert results[0].name == "FA4 fp32" and not results[0].ran
    assert results[0].reason == "flash_attn.cute is not installed (FlashAttention-4): uv sync --extra peers"


def test_a_graph_that_recorded_no_kernels_is_not_a_figure(monkeypatch, eager):
    """Where the replays of a peer's graph recorded no kernel (its work ran outside the capture),
    the replay's time is not taken for its kernel time: CUPTI over eager calls is, and says why."""
    monkeypatch.setattr(
        peer_runs, "kernel_time", lambda *_a, **_k: stats(1.0, "cuda-graph replay (no CUPTI records)")
    )
    monkeypatch.setattr(peer_fa4, "_module", lambda: FakeFA4())
    results, _errors = peer_runs.measure_peers(
        measurement(CASES["GQA"], FORWARD_PASS), ("fa4",), RunOptions(), 10**9, 10**6
    )
    assert results[0].timing.median_us == 55.0
    assert "recorded no kernels" in results[0].timing_method
