"""The keywords of each SDPA operation of the frontend, and the one function that sets them.

The frontend accepts any keyword silently, so a misspelling, or an option an operation lacks,
would change nothing and say nothing. Every keyword goes through sdpa_kwargs(), which refuses
an option the operation has no keyword for, and a test checks these sets against the binding.
"""

from __future__ import annotations

from typing import Any

from ..model.config import SdpaConfig
from ..model.tensor_plan import FP8_BACKWARD_SCALES, FP8_FORWARD_SCALES, ROW_OUTPUTS
from .score_mod import score_mod_keywords

# The keywords this product sets on each SDPA operation.
_MASK_KEYWORDS = {
    "name",
    "q",
    "k",
    "v",
    "attn_scale",
    "use_causal_mask",
    "use_causal_mask_bottom_right",
    "diagonal_alignment",
    "use_padding_mask",
    "seq_len_q",
    "seq_len_kv",
    "dropout",
    "sink_token",
}
_PAGED = {"paged_attention_k_table", "paged_attention_v_table", "paged_attention_max_seq_len_kv"}
_PACKED_BACKWARD = {"max_total_seq_len_q", "max_total_seq_len_kv", "dSink_token"}
OP_KEYWORDS: dict[str, frozenset[str]] = {
    "sdpa": frozenset(
        _MASK_KEYWORDS
        | {
            "generate_stats",
            "diagonal_band_left_bound",
            "use_alibi_mask",
            "bias",
            "implementation",
            "rng_dump",
            "score_mod",
        }
        | _PAGED
        | set(ROW_OUTPUTS)
    ),
    "sdpa_backward": frozenset(
        _MASK_KEYWORDS
        | {
            "o",
            "dO",
            "stats",
            "diagonal_band_left_bound",
            "use_alibi_mask",
            "bias",
            "use_deterministic_algorithm",
            "score_mod",
            "score_mod_bprop",
        }
        | _PACKED_BACKWARD
    ),
    "sdpa_fp8": frozenset(
        _MASK_KEYWORDS
        | {"generate_stats", "left_bound", "use_alibi_mask", "bias", "implementation", "rng_dump"}
        | _PAGED
        | set(ROW_OUTPUTS)
        | set(FP8_FORWARD_SCALES)
    ),
    "sdpa_fp8_backward": frozenset(
        _MASK_KEYWORDS
        | {"o", "dO", "stats", "left_bound", "use_deterministic_algorithm"}
        | _PACKED_BACKWARD
        | set(FP8_BACKWARD_SCALES)
    ),
}
SDPA_KEYWORDS = OP_KEYWORDS["sdpa"]


class UnsupportedOption(Exception):
    """The configuration asks for an option the chosen SDPA operation has no keyword for."""


def op_name(config: SdpaConfig, backward: bool = False) -> str:
    return ("sdpa_fp8" if config.fp8 else "sdpa") + ("_backward" if backward else "")


_OPTION_WORDS = {
    "use_alibi_mask": "ALiBi",
    "bias": "an additive bias",
    "implementation": "an implementation choice",
    "rng_dump": "a dropout mask dump",
    "left_bound": "a sliding window",
    "diagonal_band_left_bound": "a sliding window",
    "paged_attention_k_table": "a paged KV cache",
    "paged_attention_max_seq_len_kv": "a paged KV cache",
    "sink_token": "sink tokens",
    "score_max": "the softmax's row max and sum of exponents",
    "score_mod": "a score modifier",
}


def sdpa_kwargs(
    config: SdpaConfig,
    tensors: dict[str, Any] | None = None,
    op: str = "sdpa",
    tokens: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """The keywords of `op` (sdpa, sdpa_backward, sdpa_fp8, sdpa_fp8_backward) for this config;
    `tensors` are the graph tensors the op reads (q, k, v, ... and the optional seq_len_q,
    seq_len_kv, bias, seed, offset and scale tensors; absent: the option keywords only), `tokens`
    the real tokens of each side (the tensor plan's). Raises UnsupportedOption when the config
    needs a keyword the op does not have."""
    import cudnn

    backward = op.endswith("_backward")
    kw: dict[str, Any] = {"name": op, "attn_scale": config.scale}
    kw.update(_pass_options(config, backward, cudnn))
    tensors = dict(tensors or {})
    seed, offset = tensors.pop("seed", None), tensors.pop("offset", None)
    kw.update(tensors)
    if config.dropout and seed is not None:
        kw["dropout"] = (config.dropout, seed, offset)
    kw.update(_mask_options(config, cudnn))
    if config.paged:  # the backward has no page tables: sdpa_backward refuses it below
        kw["paged_attention_max_seq_len_kv"] = config.s_kv
    if config.packed and backward:  # the packed token totals bound the backward's token axis
        kw["max_total_seq_len_q"], kw["max_total_seq_len_kv"] = tokens
    kw.update(score_mod_keywords(config.variant, backward))  # the variant's sub-graph (score_mod.py)
    missing = [k for k in kw if k not in OP_KEYWORDS[op]]  # the frontend would drop them silently
    if missing:
        raise UnsupportedOption(f"{op} has no option for {_OPTION_WORDS.get(missing[0], repr(missing[0]))}")
    return kw


def _pass_options(config: SdpaConfig, backward: bool, cudnn: Any) -> dict[str, Any]:
    """The keywords of one direction: the forward's stats and implementation, the backward's determinism."""
    kw: dict[str, Any] = {}
    if not backward:
        kw["generate_stats"] = config.backward or config.softmax_out == "stats"
        if config.implementation != "auto":
            kw["implementation"] = getattr(cudnn.attention_implementation, config.implementation.upper())
    elif config.deterministic:
        kw["use_deterministic_algorithm"] = True
    return kw


def _mask_options(config: SdpaConfig, cudnn: Any) -> dict[str, Any]:
    """The mask keywords: causal alignment, sliding window, padding and ALiBi."""
    kw: dict[str, Any] = {}
    if config.causal == "top_left":
        kw["use_causal_mask"] = True
    elif config.causal == "bottom_right":
        kw["use_causal_mask_bottom_right"] = True
    if config.window:
        kw["left_bound" if config.fp8 else "diagonal_band_left_bound"] = config.window
        if config.causal == "none":
            kw["diagonal_alignment"] = cudnn.diagonal_alignment.TOP_LEFT
    if config.padded:
        kw["use_padding_mask"] = True
    if config.alibi:
        kw["use_alibi_mask"] = True
    return kw
