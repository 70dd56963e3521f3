"""What the UI and the engine process say to each other: one dataclass a message, used by both
ends (client.py sends requests and reads replies, child.py the other way round).

Messages are pickled over two pipes. A request carries the model's records (SdpaConfig,
RunOptions, SearchOptions); a reply carries records as their plain dicts (`to_dict()`), so that
reading one in the UI's process never imports the engine's code, torch or cudnn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.config import SdpaConfig
from ..model.options import RunOptions
from ..model.search_results import SearchOptions

EXIT_CONTEXT_LOST = 75  # the child's exit after a run lost the CUDA context (EX_TEMPFAIL)
# the child's exit after answering a knob search: hundreds of plans built and the memory it used
# leave later runs in that process slower (the decode pin read 160-162 µs there, 155 µs fresh)
EXIT_RETIRED = 76


# ---- parent -> child ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RunRequest:
    """Build, run and check `config`."""

    request_id: int
    config: SdpaConfig
    options: RunOptions


@dataclass(frozen=True)
class ExplainRequest:
    """Who refuses `config`, and what near it works (plans are built, none executed)."""

    request_id: int
    config: SdpaConfig


@dataclass(frozen=True)
class SearchRequest:
    """A knob search of the forward of `config`."""

    request_id: int
    config: SdpaConfig
    options: SearchOptions


@dataclass(frozen=True)
class FaultRequest:
    """Lose the CUDA context on purpose (the soak's proof that it costs one process)."""

    request_id: int


@dataclass(frozen=True)
class Cancel:
    """Stop that request at its next step; it is answered, as cancelled."""

    request_id: int


@dataclass(frozen=True)
class Stop:
    """End the engine process."""


Request = RunRequest | ExplainRequest | SearchRequest | FaultRequest


# ---- child -> parent ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    environment: dict[str, Any]  # Environment.__dict__


@dataclass(frozen=True)
class Progress:
    request_id: int
    text: str


@dataclass(frozen=True)
class RunReply:
    request_id: int
    result: dict[str, Any]  # RunResult.to_dict()


@dataclass(frozen=True)
class ExplainReply:
    request_id: int
    explanation: dict[str, Any] | None  # Explanation.to_dict(); None when asking failed
    error: str = ""  # why it failed


@dataclass(frozen=True)
class SearchReply:
    request_id: int
    result: dict[str, Any]  # SearchResult.to_dict()


Reply = Ready | Progress | RunReply | ExplainReply | SearchReply
