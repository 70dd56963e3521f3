"""The peer: torch's own SDPA forced to one of its backends other than cuDNN, the first of
FLASH, EFFICIENT and MATH that runs the configuration (reference.torch_sdpa and torch_sdpa_grads
run it under one backend). Left to choose, torch 2.11 on the H200 runs cuDNN's own kernel, whose
error is cuDNN's to the bit (DESIGN fact 12): no context for cuDNN's figures."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import SdpaConfig

# Tried in this order; the first that runs the configuration is the peer. Never cuDNN.
PEER_BACKENDS: tuple[str, ...] = ("FLASH", "EFFICIENT", "MATH")
SDP_BACKENDS = {"FLASH": "FLASH_ATTENTION", "EFFICIENT": "EFFICIENT_ATTENTION", "MATH": "MATH"}  # no CUDNN


@dataclass(frozen=True)
class PeerRun:
    """What the peer gave: the backend that ran (FLASH, EFFICIENT or MATH; '' where none did),
    its outputs (None where none ran), and (backend, torch's reason) for each that refused first."""

    backend: str
    outputs: Any = None
    refused: tuple[tuple[str, str], ...] = ()


def forced(backend: str | None) -> Any:
    """A context in which torch's SDPA may use `backend` only (None: torch's own choice)."""
    if backend is None:
        return contextlib.nullcontext()
    if backend not in SDP_BACKENDS:
        raise ValueError(f"not a peer backend: {backend!r} (the peer is never cuDNN)")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, SDP_BACKENDS[backend]))


def first_backend(run: Callable[[str], Any], backends: tuple[str, ...] | None = None) -> PeerRun:
    """`run(backend)`, which forces that backend (torch_sdpa, torch_sdpa_grads), for each of
    `backends` (PEER_BACKENDS) in turn until one runs. A backend that cannot run the configuration
    raises a RuntimeError ("No available kernel...", after UserWarnings saying why): that is a
    refusal, and the next is tried. The warnings are kept as the reason, not shown. Running out of
    memory and CUDA errors are no refusal: they propagate."""
    import torch

    refused: list[tuple[str, str]] = []
    for backend in PEER_BACKENDS if backends is None else backends:
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            try:
                outputs = run(backend)
            except torch.cuda.OutOfMemoryError:
                raise
            except RuntimeError as exc:
                if "CUDA error" in str(exc):
                    raise
                refused.append((backend, refusal_reason([str(w.message) for w in heard], exc)))
                continue
        return PeerRun(backend, outputs, tuple(refused))
    return PeerRun("", None, tuple(refused))


def refusal_reason(heard: list[str], exc: Exception) -> str:
    """torch's reason for refusing, in a few words: the first warning that gives one (not a heading
    such as "Flash attention kernel not used because:", nor the other backends being disabled,
    which torch also says on CUDA), else the error's first sentence."""
    said = [m.split(" (Triggered internally", 1)[0].strip() for m in heard]
    reasons = [m for m in said if m and not m.endswith(":") and not re.search("disabled|cuBLAS", m)]
    text = reasons[0] if reasons else str(exc).strip()
    return text.split(". ", 1)[0].split("\n", 1)[0].rstrip(".")


def expand_kv(config: SdpaConfig, k: Any, v: Any) -> tuple[Any, Any]:
    """GQA's K and V repeated to the h_q query heads (query head i reads kv head i // group), so
    every backend computes GQA as plain multi-head attention: the same arithmetic per head (each
    head's softmax(q k^T) v does not depend on the others). Chosen over torch's enable_gqa, which
    not every backend takes (EFFICIENT refuses GQA, DESIGN fact 13; torch before 2.5 has no
    enable_gqa), so that which backend is the peer depends on the shape and the mask, not on GQA
    support: FLASH and EFFICIENT stay in reach. The cost is K and V times the group in memory."""
    group = config.h_q // config.h_kv
    if group == 1:
        return k, v
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
