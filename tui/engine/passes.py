"""What a pass is: the forward and the backward of attention, each with its graph, the tensors
it reads and writes, its FLOPs and bytes, its fp32 reference and its peer (torch's own SDPA,
forced to a backend other than cuDNN: see Pass.peer).

A pass is data the one measurement path (measure.py) and the CPU mode (cpu.py) read; neither
knows which pass it measures. A later pass reads what the earlier ones wrote (the backward
reads the forward's o and softmax stats), so `before` maps each earlier pass's kind to its BuiltPass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..model.config import BACKWARD_FLOPS_RULE, SdpaConfig
from ..model.inputs import Recipe, recipe_of
from ..model.results import ErrorMetrics
from ..model.statuses import BACKWARD, FORWARD
from ..model.tensor_plan import BACKWARD_AMAX, FORWARD_AMAX, FP8_FORWARD_SCALES
from . import fp8, storage
from .graph import SdpaGraph
from .peer import described, first_backend, peer_name, torch_sdpa, torch_sdpa_grads
from .recipes import real_parts
from .reference import REFERENCE_NAME, reference_fp32, reference_grads, softmax_rows, valid_rows
from .tensors import backward_tensors, device_tensors
from .tolerances import TOLERANCES, output_tolerance

Progress = Callable[[float], None]
GRAD_REFERENCE_NAME = "fp32 autograd of the reference on the same logical tensors and the same dO"


@dataclass
class BuiltPass:
    """A pass built on the GPU: its graph, every tensor it reads and writes by name, and what its
    check needs once computed (the reference, tolerances, the peer's error), kept for reruns. A
    pass cuDNN declined has no graph (None), only its tensors, for the reference and the peers."""

    kind: str
    graph: SdpaGraph | None
    data: dict[str, Any]
    workspace: Any
    reference: dict[str, Any] | None = None  # output -> fp32 reference
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)  # output -> (atol, rtol)
    peer_metrics: dict[str, dict[str, ErrorMetrics]] = field(default_factory=dict)  # output -> peer -> error
    peers: dict[str, str] = field(default_factory=dict)  # peer's name -> what it ran (PassResult.peers)
    peer_notes: tuple[str, ...] = ()  # why no peer is shown, where no torch backend ran
    dropout_mask: Any = None  # the mask cuDNN drew, for this pass's and later passes' references
    cache_notes: tuple[str, ...] = ()  # what the plan cache said while building (a blob rebuilt)
    fp64: dict[str, Any] | None = None  # output -> its fp64 cross-check reference, once asked
    fp64_notes: tuple[str, ...] = ()  # what the cross-check compared with, or why it did not
    check_notes: tuple[str, ...] = ()  # what making the check said (the dropout mask's plan)
    mask_ones: float | None = None  # the ones of the dropout mask cuDNN dumped (None: none dumped)
    mask_shortfall: str = ""  # why the dropout mask cuDNN dumped is not the one it applied ('' : it is)
    config: SdpaConfig | None = None  # the graph's configuration (given where there is no graph)

    def __post_init__(self) -> None:
        if self.config is None:
            self.config = self.graph.config

    @property
    def pack(self) -> dict[Any, Any]:
        return self.graph.variant_pack(self.data)

    def values(self, name: str) -> Any:
        return storage.logical(self.config, self.data, name)


@dataclass(frozen=True)
class Inputs:
    """What a reference and a peer compute from, as logical numbers (FP8 dequantised, pages
    gathered, tokens unpacked): q, k, v, the bias, the output gradient dO of a backward, the
    dropout mask cuDNN drew (None: off), the sink logits (None: no sink tokens) and, for a
    backward, O as cuDNN's forward stored it (what its backward reads: the tolerance's floor)."""

    q: Any
    k: Any
    v: Any
    bias: Any = None
    d_o: Any = None
    dropout_mask: Any = None
    sink: Any = None
    o: Any = None

    def real_parts(self, config: SdpaConfig) -> Inputs:
        """With an input recipe's fill, every part past the real lengths zeroed (recipes.real_parts):
        the reference and the peers read what a correct kernel reads, and no NaN of the padding."""
        q, k, v, bias, d_o = real_parts(config, self.q, self.k, self.v, self.bias, self.d_o)
        return Inputs(q, k, v, bias, d_o, self.dropout_mask, self.sink, self.o)

    def for_peer(self, config: SdpaConfig) -> Inputs:
        """torch has no FP8 attention: its SDPA runs in fp16 on the dequantised values."""
        if not config.fp8:
            return self
        half = (x.half() for x in (self.q, self.k, self.v))
        d_o = None if self.d_o is None else self.d_o.half()
        return Inputs(*half, self.bias, d_o, self.dropout_mask, self.sink)


NO_PEER_NOTE = "no torch backend other than cuDNN runs this configuration: no peer error is shown"


@dataclass(frozen=True)
class Peer:
    """A pass's peer as it ran: its name and what it ran (PassResult.peers), and its outputs by
    name; outputs None where no torch backend but cuDNN runs the configuration (notes say so)."""

    name: str = ""
    description: str = ""
    outputs: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()


class Pass:
    """What every pass has; Forward and Backward fill it in."""

    kind = ""
    outputs: dict[str, str] = {}  # output's name on screen -> its tensor's name in `data`
    flops_rule = ""  # how the FLOPs are counted, when by convention
    peer_what = "torch SDPA"  # what the peer runs, before its backend
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

    def output_keys(self, config: SdpaConfig) -> dict[str, str]:
        """The outputs checked for this configuration: name on screen -> tensor's name in `data`."""
        return dict(self.outputs)

    def check_cost(self, config: SdpaConfig) -> int:
        """FLOPs of the reference and the peer: the forward's, and a backward's on top of it."""
        return self.flops(config) + (config.flops() if self.grad else 0)

    def tensors(
        self, config: SdpaConfig, seed: int, before: dict[str, BuiltPass], device: str = "cuda"
    ) -> dict[str, Any]:
        """Every device tensor the pass's graph reads and writes, by name."""
        raise NotImplementedError

    def needs_scaling(self, config: SdpaConfig) -> bool:
        return False

    def reference(
        self, config: SdpaConfig, inputs: Inputs, progress: Progress | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def peer(self, config: SdpaConfig, inputs: Inputs) -> Peer | None:
        """The peer: torch's SDPA in the inputs' precision (fp16 on FP8's dequantised values),
        forced to the first of its FLASH, EFFICIENT and MATH backends that runs this configuration,
        never to cuDNN (which torch picks itself where it can: DESIGN fact 12). Its name says which
        backend ran. None where the pass has no peer at all (dropout: see notes)."""
        if not self.has_peer(config, inputs):
            return None
        p = inputs.for_peer(config)
        run = first_backend(lambda backend: self.peer_outputs(config, p, backend))
        if run.outputs is None:
            why = "; ".join(f"{backend}: {reason}" for backend, reason in run.refused)
            return Peer(notes=(f"{NO_PEER_NOTE} ({why})" if why else NO_PEER_NOTE,))
        description = described(self.peer_what, config, run, p.q.device.type)
        return Peer(peer_name(config, run.backend), description, run.outputs)

    def has_peer(self, config: SdpaConfig, inputs: Inputs) -> bool:
        """Whether torch can compute what cuDNN did at all (not: with the mask cuDNN drew; no sink;
        no softcap: a variant's mask alone goes as an explicit mask)."""
        return inputs.dropout_mask is None and not config.sink and config.modifier.cap is None

    def peer_outputs(self, config: SdpaConfig, inputs: Inputs, backend: str) -> dict[str, Any]:
        """The peer's outputs under one backend, forced (raises where it refuses)."""
        raise NotImplementedError

    def rows(self, config: SdpaConfig, device: Any) -> dict[str, Any]:
        """Each output's real rows (padding): the only ones compared."""
        raise NotImplementedError

    def tolerance(self, config: SdpaConfig, output: str, ref: Any, inputs: Inputs) -> tuple[float, float]:
        """(atol, rtol) of one output, its atol never below what the inputs' size allows."""
        return output_tolerance(config, output, ref, inputs, self.grad)

    def notes(self, config: SdpaConfig) -> tuple[str, ...]:
        return ()


class Forward(Pass):
    kind = FORWARD
    outputs = {"O": "o"}
    fp8_delayed = fp8.FORWARD_DELAYED
    fp8_scales = FP8_FORWARD_SCALES
    fp8_amax = FORWARD_AMAX

    def flops(self, config: SdpaConfig) -> int:
        return config.flops()

    def io_bytes(self, config: SdpaConfig) -> int:
        return config.io_bytes()

    def output_keys(self, config: SdpaConfig) -> dict[str, str]:
        keys = dict(self.outputs)
        if config.softmax_out == "stats":
            keys["Stats"] = "stats"
        elif config.softmax_out == "max_sum_exp":
            keys.update(Max="score_max", SumExp="score_sum_exp")
        return keys

    def tensors(
        self, config: SdpaConfig, seed: int, before: dict[str, BuiltPass], device: str = "cuda"
    ) -> dict[str, Any]:
        return device_tensors(config, device, seed)

    def needs_scaling(self, config: SdpaConfig) -> bool:
        return config.fp8 and config.o_dtype == "fp8_e4m3"

    def reference(
        self, config: SdpaConfig, inputs: Inputs, progress: Progress | None = None
    ) -> dict[str, Any]:
        ref = reference_fp32(
            config, inputs.q, inputs.k, inputs.v, inputs.bias, inputs.dropout_mask, progress, inputs.sink
        )
        if config.softmax_out == "none":
            return {"O": ref}
        top, total = softmax_rows(config, inputs.q, inputs.k, inputs.bias, inputs.sink)
        if config.softmax_out == "stats":
            return {"O": ref, "Stats": top + total.log()}
        return {"O": ref, "Max": top, "SumExp": total}

    def peer_outputs(self, config: SdpaConfig, inputs: Inputs, backend: str) -> dict[str, Any]:
        return {"O": torch_sdpa(config, inputs.q, inputs.k, inputs.v, inputs.bias, backend)}

    def rows(self, config: SdpaConfig, device: Any) -> dict[str, Any]:
        return dict.fromkeys(self.output_keys(config), valid_rows(config, device))

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
        notes += storage_notes(config)
        return tuple(notes)


class Backward(Pass):
    kind = BACKWARD
    outputs = {"dQ": "dQ", "dK": "dK", "dV": "dV"}
    flops_rule = BACKWARD_FLOPS_RULE
    peer_what = "torch SDPA backward"
    reference_name = GRAD_REFERENCE_NAME
    grad = True
    repeat_check = True
    fp8_delayed = fp8.BACKWARD_DELAYED
    fp8_scales = ("descale_o", "descale_dO", "scale_dQ", "scale_dK", "scale_dV", "scale_dP", "descale_dP")
    fp8_amax = BACKWARD_AMAX

    def flops(self, config: SdpaConfig) -> int:
        return config.backward_flops()

    def io_bytes(self, config: SdpaConfig) -> int:
        return config.backward_io_bytes()

    def output_keys(self, config: SdpaConfig) -> dict[str, str]:
        return {**self.outputs, "dSink": "dSink_token"} if config.sink else dict(self.outputs)

    def tensors(
        self, config: SdpaConfig, seed: int, before: dict[str, BuiltPass], device: str = "cuda"
    ) -> dict[str, Any]:
        return backward_tensors(config, before[FORWARD].data, device, seed)

    def needs_scaling(self, config: SdpaConfig) -> bool:
        return config.fp8

    def reference(
        self, config: SdpaConfig, inputs: Inputs, progress: Progress | None = None
    ) -> dict[str, Any]:
        grads = reference_grads(
            config,
            inputs.q,
            inputs.k,
            inputs.v,
            inputs.d_o,
            inputs.bias,
            inputs.dropout_mask,
            progress,
            inputs.sink,
        )
        return dict(zip(self.output_keys(config), grads, strict=True))

    def has_peer(self, config: SdpaConfig, inputs: Inputs) -> bool:
        return super().has_peer(config, inputs) and not config.varlen  # padding: NaN on empty rows

    def peer_outputs(self, config: SdpaConfig, inputs: Inputs, backend: str) -> dict[str, Any]:
        p = inputs
        grads = torch_sdpa_grads(config, p.q, p.k, p.v, p.d_o.to(p.q.dtype), p.bias, backend)
        return dict(zip(self.outputs, grads, strict=True))

    def rows(self, config: SdpaConfig, device: Any) -> dict[str, Any]:
        rows = {
            "dQ": valid_rows(config, device),
            "dK": valid_rows(config, device, 1),
            "dV": valid_rows(config, device, 1),
        }
        return {**rows, "dSink": None} if config.sink else rows

    def notes(self, config: SdpaConfig) -> tuple[str, ...]:
        if config.dropout:
            return (
                "dropout on: the reference applies the mask cuDNN drew in the forward; torch's error is not shown",
            )
        if config.varlen:
            return ("padding: torch's backward gives NaN on fully masked rows, so its error is not shown",)
        return storage_notes(config)


FORWARD_PASS, BACKWARD_PASS = Forward(), Backward()


def passes_of(config: SdpaConfig) -> tuple[Pass, ...]:
    """The passes a configuration asks for, in the order they run."""
    return (FORWARD_PASS, BACKWARD_PASS) if config.backward else (FORWARD_PASS,)


def storage_notes(config: SdpaConfig) -> tuple[str, ...]:
    """How the check reads what is not stored densely, and why a peer is missing."""
    notes = []
    if config.paged:
        notes.append(
            f"paged KV cache: {config.page_order} pages of {config.page_size} tokens; the reference gathers K "
            "and V through the page table, so a page the graph misreads is an error"
        )
    if config.packed:
        notes.append("packed tokens (THD): the reference unpacks each sequence at its ragged offsets")
    if config.sink:
        notes.append(
            "sink tokens: the reference adds each head's sink logit as one more softmax column; torch has none"
        )
    notes += recipe_notes(recipe_of(config), config.padded)
    if config.variant != "none":
        v = config.modifier
        torch_words = "torch's SDPA cannot cap the scores, so its error is not shown" if v.cap else (
            "torch's SDPA is given its mask as an explicit mask")  # fmt: skip
        notes.append(f"score modifier {v.text} ({v.words()}): cuDNN's score_mod sub-graph; the reference "
                     f"applies the same modifier in fp32; {torch_words}")  # fmt: skip
    return tuple(notes)


def recipe_notes(recipe: Recipe, padded: bool) -> tuple[str, ...]:
    """What the input recipe did to the inputs (model/inputs.py), of a configuration `padded` or not;
    nothing for the default."""
    if not recipe.words():
        return ()
    fill = "; the reference and the peers read the real parts only" if recipe.pad and padded else ""
    return (f"input recipe {recipe.text}: {recipe.words()}{fill}",)
