"""What a pass is: the forward and the backward of attention, each with its graph, the tensors
it reads and writes, its FLOPs and bytes, its fp32 reference and its peer (torch's own SDPA).

A pass is data the one measurement path (measure.py) and the CPU mode (cpu.py) read; neither
knows which pass it measures. A later pass reads what the earlier ones wrote (the backward
reads the forward's o and softmax stats), so `before` maps each earlier pass's kind to its BuiltPass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import fp8
from .config import BACKWARD_FLOPS_RULE, SdpaConfig
from .graph import SdpaGraph, build, define_and_validate
from .keywords import FP8_FORWARD_SCALES
from .layouts import allocate
from .reference import (
    REFERENCE_NAME,
    TOLERANCES,
    make_inputs,
    random_like,
    reference_fp32,
    reference_grads,
    tolerance,
    torch_dtype,
    torch_sdpa,
    torch_sdpa_grads,
    valid_rows,
)
from .results import BACKWARD, FORWARD, ErrorMetrics

Progress = Callable[[float], None]
GRAD_REFERENCE_NAME = "fp32 autograd of the reference on the same logical tensors and the same dO"


@dataclass
class BuiltPass:
    """A pass built on the GPU: its graph, every tensor it reads and writes by name, and what its
    check needs once computed (the reference, tolerances, the peer's error), kept for reruns."""

    kind: str
    graph: SdpaGraph
    data: dict[str, Any]
    workspace: Any
    reference: dict[str, Any] | None = None  # output -> fp32 reference
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)  # output -> (atol, rtol)
    peer_metrics: dict[str, dict[str, ErrorMetrics]] = field(default_factory=dict)  # output -> peer -> error
    dropout_mask: Any = None  # the mask cuDNN drew, for this pass's and later passes' references

    @property
    def pack(self) -> dict[Any, Any]:
        return self.graph.variant_pack(self.data)

    def values(self, name: str) -> Any:
        return fp8.values(self.graph.config, self.data, name)


@dataclass(frozen=True)
class Inputs:
    """What a reference and a peer compute from, as numbers (FP8 dequantised): q, k, v, the
    bias, the output gradient dO of a backward, and the dropout mask cuDNN drew (None: off)."""

    q: Any
    k: Any
    v: Any
    bias: Any = None
    d_o: Any = None
    dropout_mask: Any = None

    def for_peer(self, config: SdpaConfig) -> Inputs:
        """torch has no FP8 attention: its SDPA runs in fp16 on the dequantised values."""
        if not config.fp8:
            return self
        half = (x.half() for x in (self.q, self.k, self.v))
        return Inputs(*half, self.bias, None if self.d_o is None else self.d_o.half(), self.dropout_mask)


def peer_name(config: SdpaConfig) -> str:
    """The peer of every pass: torch's own SDPA in the inputs' precision (fp16 for FP8 inputs)."""
    return f"torch {'fp16' if config.fp8 else config.dtype}"


class Pass:
    """What every pass has; Forward and Backward fill it in."""

    kind = ""
    outputs: dict[str, str] = {}  # output's name on screen -> its tensor's name in `data`
    flops_rule = ""  # how the FLOPs are counted, when by convention
    reference_name = REFERENCE_NAME
    grad = False  # tolerances relative to the reference's range (sums over a sequence)
    repeat_check = False  # check that two executions write identical bits
    fp8_delayed: dict[str, tuple[str, str | None]] = {}
    fp8_scales: tuple[str, ...] = ()
    fp8_amax: tuple[str, ...] = ()

    def flops(self, config: SdpaConfig) -> int:
        raise NotImplementedError

    def io_bytes(self, config: SdpaConfig) -> int:
        raise NotImplementedError

    def check_cost(self, config: SdpaConfig) -> int:
        """FLOPs of the reference and the peer: the forward's, and a backward's on top of it."""
        return self.flops(config) + (config.flops() if self.grad else 0)

    def validate(self, config: SdpaConfig) -> SdpaGraph:
        """The phases that need no GPU (define, validate): cuDNN's own verdict on the options."""
        return define_and_validate(config, backward=self.kind == BACKWARD)

    def build(self, config: SdpaConfig, handle: Any, seed: int, before: dict[str, BuiltPass]) -> BuiltPass:
        raise NotImplementedError

    def needs_scaling(self, config: SdpaConfig) -> bool:
        return False

    def reference(
        self, config: SdpaConfig, inputs: Inputs, progress: Progress | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def peer(self, config: SdpaConfig, inputs: Inputs) -> dict[str, Any] | None:
        """The peer's outputs (None where it cannot run this configuration)."""
        raise NotImplementedError

    def rows(self, config: SdpaConfig, device: Any) -> dict[str, Any]:
        """Each output's real rows (padding): the only ones compared."""
        raise NotImplementedError

    def tolerance(self, config: SdpaConfig, ref: Any) -> tuple[float, float]:
        return tolerance(config, ref, grad=self.grad)

    def notes(self, config: SdpaConfig) -> tuple[str, ...]:
        return ()

    def peer_description(self, config: SdpaConfig) -> str:
        raise NotImplementedError


class Forward(Pass):
    kind = FORWARD
    outputs = {"O": "o"}
    fp8_delayed = fp8.FORWARD_DELAYED
    fp8_scales = FP8_FORWARD_SCALES
    fp8_amax = fp8.FORWARD_AMAX

    def flops(self, config: SdpaConfig) -> int:
        return config.flops()

    def io_bytes(self, config: SdpaConfig) -> int:
        return config.io_bytes()

    def build(self, config: SdpaConfig, handle: Any, seed: int, before: dict[str, BuiltPass]) -> BuiltPass:
        import torch

        g = build(config, handle)
        return BuiltPass(self.kind, g, device_tensors(config, "cuda", seed), workspace(torch, g))

    def needs_scaling(self, config: SdpaConfig) -> bool:
        return config.fp8 and config.o_dtype == "fp8_e4m3"

    def reference(
        self, config: SdpaConfig, inputs: Inputs, progress: Progress | None = None
    ) -> dict[str, Any]:
        ref = reference_fp32(config, inputs.q, inputs.k, inputs.v, inputs.bias, inputs.dropout_mask, progress)
        return {"O": ref}

    def peer(self, config: SdpaConfig, inputs: Inputs) -> dict[str, Any] | None:
        if inputs.dropout_mask is not None:
            return None  # torch cannot apply the mask cuDNN drew
        p = inputs.for_peer(config)
        return {"O": torch_sdpa(config, p.q, p.k, p.v, p.bias)}

    def rows(self, config: SdpaConfig, device: Any) -> dict[str, Any]:
        return {"O": valid_rows(config, device)}

    def notes(self, config: SdpaConfig) -> tuple[str, ...]:
        notes = []
        if config.fp8:
            notes.append(
                f"FP8: the reference computes on the dequantised E4M3 inputs; atol is "
                f"{TOLERANCES[config.dtype][0]:g} of max |reference| (per-tensor scaling)"
            )
        if config.dropout:
            notes.append(
                "dropout on: the reference applies the mask cuDNN drew (dumped by the same graph with the "
                "same seed); torch's SDPA cannot apply that mask, so its error is not shown"
            )
        return tuple(notes)

    def peer_description(self, config: SdpaConfig) -> str:
        fp8_words = " in fp16 on the dequantised inputs (torch has no FP8 attention)" if config.fp8 else ""
        return "torch.nn.functional.scaled_dot_product_attention" + fp8_words

    def dropout_mask(self, built: BuiltPass, handle: Any) -> Any:
        """Run the check graph (the same graph, also dumping the dropout mask it draws) once and
        return the mask. The timed graph does not dump: writing the mask would slow it."""
        import torch

        check = build(built.graph.config, handle, rng_dump=True, every_plan=False)
        return dump_dropout_mask(check, built.data, workspace(torch, check), handle)


class Backward(Pass):
    kind = BACKWARD
    outputs = {"dQ": "dQ", "dK": "dK", "dV": "dV"}
    flops_rule = BACKWARD_FLOPS_RULE
    reference_name = GRAD_REFERENCE_NAME
    grad = True
    repeat_check = True
    fp8_delayed = fp8.BACKWARD_DELAYED
    fp8_scales = ("descale_o", "descale_dO", "scale_dQ", "scale_dK", "scale_dV", "scale_dP", "descale_dP")
    fp8_amax = fp8.BACKWARD_AMAX

    def flops(self, config: SdpaConfig) -> int:
        return config.backward_flops()

    def io_bytes(self, config: SdpaConfig) -> int:
        return config.backward_io_bytes()

    def build(self, config: SdpaConfig, handle: Any, seed: int, before: dict[str, BuiltPass]) -> BuiltPass:
        import torch

        g = build(config, handle, backward=True)
        return BuiltPass(
            self.kind, g, backward_tensors(config, before[FORWARD].data, "cuda", seed), workspace(torch, g)
        )

    def needs_scaling(self, config: SdpaConfig) -> bool:
        return config.fp8

    def reference(
        self, config: SdpaConfig, inputs: Inputs, progress: Progress | None = None
    ) -> dict[str, Any]:
        grads = reference_grads(
            config, inputs.q, inputs.k, inputs.v, inputs.d_o, inputs.bias, inputs.dropout_mask, progress
        )
        return dict(zip(self.outputs, grads, strict=True))

    def peer(self, config: SdpaConfig, inputs: Inputs) -> dict[str, Any] | None:
        if inputs.dropout_mask is not None or config.padded:
            return None  # torch cannot apply cuDNN's mask; with padding it gives NaN on empty rows
        p = inputs.for_peer(config)
        grads = torch_sdpa_grads(config, p.q, p.k, p.v, p.d_o.to(p.q.dtype), p.bias)
        return dict(zip(self.outputs, grads, strict=True))

    def rows(self, config: SdpaConfig, device: Any) -> dict[str, Any]:
        return {
            "dQ": valid_rows(config, device),
            "dK": valid_rows(config, device, 1),
            "dV": valid_rows(config, device, 1),
        }

    def notes(self, config: SdpaConfig) -> tuple[str, ...]:
        if config.dropout:
            return (
                "dropout on: the reference applies the mask cuDNN drew in the forward; torch's error is not shown",
            )
        if config.padded:
            return ("padding: torch's backward gives NaN on fully masked rows, so its error is not shown",)
        return ()

    def peer_description(self, config: SdpaConfig) -> str:
        return "torch SDPA backward" + (" in fp16 on the dequantised inputs" if config.fp8 else "")


FORWARD_PASS, BACKWARD_PASS = Forward(), Backward()


def passes_of(config: SdpaConfig) -> tuple[Pass, ...]:
    """The passes a configuration asks for, in the order they run."""
    return (FORWARD_PASS, BACKWARD_PASS) if config.backward else (FORWARD_PASS,)


def workspace(torch: Any, g: SdpaGraph) -> Any:
    return torch.empty(max(g.workspace_bytes, 1), dtype=torch.uint8, device="cuda")


def dump_dropout_mask(check: SdpaGraph, data: dict[str, Any], ws: Any, handle: Any) -> Any:
    """One execution of `check`, the forward defined with rng_dump, on the forward's tensors (its
    outputs written to scratch copies): the dropout mask it drew, (b, h_q, s_q, s_kv) of 0 and 1."""
    import torch

    config = check.config
    dump = torch.empty((config.b, config.h_q, config.s_q, config.s_kv), dtype=torch.float32, device="cuda")
    data = {**data, "o": torch.empty_like(data["o"]), "rng_dump": dump}
    if "stats" in data:
        data["stats"] = torch.empty_like(data["stats"])
    check.graph.execute(check.variant_pack(data), ws, handle=handle)
    torch.cuda.synchronize()
    return dump


def device_tensors(config: SdpaConfig, device: str, seed: int) -> dict[str, Any]:
    """Everything the forward graph reads and writes, by name: q, k, v, o, and the stats,
    lengths, bias, dropout seed and FP8 scales when the config has them."""
    import torch

    q, k, v, bias = make_inputs(config, device, seed)
    data = {"q": q, "k": k, "v": v}
    if config.fp8:
        fp8.forward_scales(config, data, device)
    data["o"] = allocate(torch, config.o_dims, config.layout, torch_dtype(torch, config.o_dtype), device)
    if config.backward:
        data["stats"] = torch.empty((config.b, config.h_q, config.s_q, 1), dtype=torch.float32, device=device)
    if bias is not None:
        data["bias"] = bias
    if config.dropout:
        data["seed"] = torch.full((1, 1, 1, 1), config.dropout_seed, dtype=torch.int64, device=device)
        data["offset"] = torch.zeros((1, 1, 1, 1), dtype=torch.int64, device=device)
    if config.padded:
        for name, side in (("seq_len_q", 0), ("seq_len_kv", 1)):
            lens = [config.lengths(bi)[side] for bi in range(config.b)]
            data[name] = torch.tensor(lens, dtype=torch.int32, device=device).view(config.b, 1, 1, 1)
    return data


def backward_tensors(config: SdpaConfig, forward: dict[str, Any], device: str, seed: int) -> dict[str, Any]:
    """The backward's tensors: the forward's (q, k, v, o, stats, options) shared, a seeded output
    gradient dO, and dQ, dK, dV; for FP8 also the backward's scales and amax outputs."""
    import torch

    data = dict(forward)
    d_o = random_like(config, config.o_dims, device, seed + 1)
    data["dO"] = fp8.backward_scales(config, data, d_o, device) if config.fp8 else d_o
    dt = torch_dtype(torch, config.dtype)
    for name, dims in (("dQ", config.q_dims), ("dK", config.k_dims), ("dV", config.v_dims)):
        data[name] = allocate(torch, dims, config.layout, dt, device)
    return data
