"""What every peer adapter shares: the tensors it computes from, what it gives back once
prepared, its refusal, and a backward through autograd. peers.py holds the adapters and their
registry; an adapter in a module of its own (peer_fa4.py) builds on these without importing
the registry."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig


class Refused(Exception):
    """A peer cannot run this configuration; the message says why, in one line."""


@dataclass(frozen=True)
class Prepared:
    """A peer ready to run: one forward call, what it is, and what preparing it cost (Flex's
    compile time, kept apart from its kernel time)."""

    run: Callable[[], Any]
    description: str
    compile_seconds: float | None = None
    uncapturable: str = ""  # why a CUDA graph cannot hold it ('' : it can)
    logical: Callable[[Any], Any] | None = None  # its output as (b, h, s, d), where `run` gives another form

    def outputs(self, out: Any) -> Any:
        """What `run` gave, as the check compares it (packed tokens unpacked: outside timing)."""
        return out if self.logical is None else self.logical(out)


@dataclass(frozen=True)
class Tensors:
    """What every peer computes from: q, k, v as (b, h, s, d) in the peer's precision (fp16 on
    FP8's dequantised values), the bias (None: none) and the sink logits, (1, h_q, 1, 1) fp32
    (None: no sink tokens)."""

    q: Any
    k: Any
    v: Any
    bias: Any = None
    sink: Any = None
    stored: Any = None  # the pass's own device tensors by name (pools, page tables); None: none


def precision(config: SdpaConfig) -> str:
    """The peers' precision: torch has no FP8 attention, so FP8 runs in fp16 on the same values."""
    return "fp16" if config.fp8 else config.dtype


def always(config: SdpaConfig, sinks: bool = False, modifiers: bool = False) -> str:
    """What no peer here can do: dropout draws its own mask (cuDNN's cannot be applied), and,
    unless the peer takes them (`sinks`), no peer's softmax takes a sink logit; a score modifier
    (variant) only where the peer applies it (`modifiers`: its parameters are config.modifier's)."""
    if config.dropout:
        return "dropout: a peer would draw its own mask, so its output cannot be compared"
    if config.sink and not sinks:
        return "sink tokens: no peer here adds a sink logit to its softmax"
    if config.variant != "none" and not modifiers:
        return f"the score modifier {config.variant}: this peer is not given it here"
    return ""


def lengths_of(config: SdpaConfig, side: int) -> list[int]:
    """Each sequence's real length on one side (0: queries, 1: keys and values)."""
    return [config.lengths(i)[side] for i in range(config.b)]


def starts(lengths: list[int]) -> list[int]:
    """[0, l0, l0 + l1, ...]: where each sequence's tokens start, then the total (cu_seqlens, indptr)."""
    return list(itertools.accumulate(lengths, initial=0))


UNCAPTURED = "a backward through autograd is timed over eager calls"


def backward_of(adapter: Any, config: SdpaConfig, t: Tensors, d_o: Any) -> Prepared:
    """A peer's backward through autograd: its forward once on leaves that want gradients (kept
    for every call), then each call computes dQ, dK, dV for the same dO. The first backward is
    part of preparing (Flex and FA4 compile it), reported with the forward's compile time.

    It is timed by CUPTI over eager calls (kernel sums), not in a CUDA graph: on the H200 a
    capture of autograd's backward failed for FA4 ("operation failed due to a previous error
    during capture") and, with the forward on a stream of its own, for Flex ("capturing stream
    has unjoined work"), each leaving the context erroring."""
    import torch

    q, k, v = (x.detach().requires_grad_() for x in (t.q, t.k, t.v))
    forward = adapter.prepare(config, dataclasses.replace(t, q=q, k=k, v=v))
    t0 = time.perf_counter()
    out = forward.outputs(forward.run())

    def run() -> dict[str, Any]:
        grads = torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True)
        return dict(zip(("dQ", "dK", "dV"), grads, strict=True))

    run()
    if q.is_cuda:
        torch.cuda.synchronize()
    compiled = None if forward.compile_seconds is None else forward.compile_seconds + time.perf_counter() - t0
    return Prepared(
        run, f"{forward.description}; its backward through autograd", compiled, uncapturable=UNCAPTURED
    )


class OptionalPeer:
    """A peer from a package that is not a dependency: there when its module imports."""

    key = module = title = missing = ""

    def name(self, config: SdpaConfig) -> str:
        return f"{self.title} {precision(config)}"

    def load(self) -> Any:
        return importlib.import_module(self.module)

    def unavailable(self) -> str:
        try:
            self.load()
        except ImportError:
            return self.missing
        except Exception as exc:  # a wheel built for another CUDA or torch fails as it imports
            return f"{self.module} does not import ({str(exc).strip().splitlines()[0][:100]})"
        return ""
