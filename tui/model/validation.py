"""Whether a configuration makes sense: each field's own check, then the rules across fields.

A field's own type, limits and choices come from its declaration (fields.py). The rules here
involve several fields; each is a small function of the config and of the fields already
found bad, so that one typo is reported once, at its field, and not again by every rule
that reads it. Whether cuDNN supports a sensible configuration is cuDNN's to say.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .config import DTYPES, FieldError, SdpaConfig, format_bytes
from .fields import FIELDS, Lengths, quote
from .inputs import problems as recipe_problems

Rule = Callable[[SdpaConfig, set[str]], Iterator[FieldError]]
SHAPE = frozenset(f.name for f in FIELDS if f.group == "shape")


def validate(config: SdpaConfig, gpu_memory_bytes: int | None = None) -> list[FieldError]:
    """Every problem at once, each naming its field; [] when the config is sensible. With
    the GPU's memory, a config that would not fit in it is a problem too."""
    errors = [FieldError(f.name, message) for f in FIELDS if (message := f.problem(getattr(config, f.name)))]
    bad = {e.field for e in errors}
    for rule in RULES:
        errors += rule(config, bad)
    if gpu_memory_bytes is not None:
        errors += fits_in_memory(config, bad, gpu_memory_bytes)
    return errors


def heads_divide(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """Grouped-query attention: each key/value head serves the same number of query heads."""
    if not {"h_q", "h_kv"} & bad and config.h_q % config.h_kv:
        yield FieldError("h_kv", f"h_q must be a multiple of h_kv (got {config.h_q} and {config.h_kv})")


def bottom_right_fits(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    if not {"s_q", "s_kv", "causal"} & bad and config.causal == "bottom_right" and config.s_q > config.s_kv:
        yield FieldError(
            "causal",
            f"bottom-right causal needs s_q <= s_kv (got {config.s_q} and {config.s_kv}): "
            "the first queries would see no key",
        )


def window_fits(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """Unpadded, a sliding window takes no more queries than keys."""
    if config.window is None or {"window", "b", "s_q", "s_kv"} & bad or config.padded:
        return
    if config.s_q > config.s_kv:
        yield FieldError(
            "window",
            "a sliding window needs s_q <= s_kv unless lengths are padded "
            f"(got {config.s_q} and {config.s_kv})",
        )


def lengths_fit(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """Real lengths: one per batch entry, each within its side's sequence length."""
    for f in FIELDS:
        lens = getattr(config, f.name)
        size = f.meta.get("size")
        if not isinstance(f, Lengths) or lens is None or {f.name, "b", size} & bad:
            continue
        limit = getattr(config, size)
        if len(lens) != config.b:
            yield FieldError(
                f.name, f"{f.label} need one length per batch entry: {config.b} (got {len(lens)})"
            )
        elif any(not 1 <= x <= limit for x in lens):
            wrong = next(x for x in lens if not 1 <= x <= limit)
            yield FieldError(f.name, f"{f.label} must lie between 1 and {limit} (got {quote(wrong)})")


def lengths_pair(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """A padding mask has both sides or neither ('full' is a side without padding)."""
    if (config.seq_lens_q is None) != (config.seq_lens_kv is None):
        missing = "seq_lens_kv" if config.seq_lens_kv is None else "seq_lens_q"
        yield FieldError(missing, "padding needs both query and key/value lengths (use 'full' for one side)")


def pages_fit(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """A page past the longest sequence it holds is padding that every read of the cache moves."""
    if config.page_size is None or {"page_size", "s_kv"} & bad or config.page_size <= config.s_kv:
        return
    yield FieldError(
        "page_size",
        f"a page of {config.page_size} tokens is longer than the longest sequence it holds (s_kv "
        f"{config.s_kv}): at most {config.s_kv} is of use",
    )


def out_dtype_for_fp8(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """fp16 and bf16 attention writes O in its inputs' dtype; only FP8 may choose."""
    if {"dtype", "out_dtype"} & bad or config.fp8 or config.o_dtype == config.dtype:
        return
    yield FieldError(
        "out_dtype",
        f"{config.dtype} inputs give {config.dtype} output; only FP8 inputs may choose (got {config.out_dtype})",
    )


def deterministic_needs_backward(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    if config.deterministic is True and config.backward is False:
        yield FieldError(
            "deterministic", "the deterministic option is for the backward pass: turn the backward pass on"
        )


_DIAGONAL = "cuDNN refuses a score_mod beside diagonal bounds (causal, window)"


def inside(config: SdpaConfig) -> str | None:
    """The variant that writes the configuration's causal mask (and window) inside its score
    modifier, for the same attention with causal none; None where there is none (no causal mask,
    or one the modifier's top-left causal mask is not)."""
    if (
        config.variant == "none"
        or config.causal == "none"
        or (config.causal == "bottom_right" and config.s_q != config.s_kv)
    ):
        return None
    v = config.modifier
    if v.cap is not None:
        window = config.window or v.window
        return f"softcap-causal:{v.text.partition(':')[2].split(',')[0]}" + (f",{window}" if window else "")
    return v.text if v.masks and not config.window else None


def modifier_alone(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """cuDNN's sdpa refuses a score_mod beside diagonal bounds (causal, window), a padding mask or
    ALiBi ("Attention score mod enabled and hence other subgraphs are disabled"): a variant writes
    the mask it needs inside itself, and each refusal says which one does."""
    if config.variant == "none" or {"variant", "s_q", "s_kv"} & bad:
        return
    said, same = f"the score modifier {config.variant}", inside(config)
    if config.window or config.causal != "none":
        what = "a sliding window" if config.window else "the causal mask"
        off = [w for w, on in (("causal none", config.causal != "none"), ("no window", config.window)) if on]
        how = "set " + " and ".join(off)
        if same == config.variant:
            how = f"{config.modifier.name} writes its causal mask inside the modifier: {how}"
        elif same:
            how = f"write it inside the modifier: variant {same} with {how.removeprefix('set ')}"
        yield FieldError("variant", f"{said} cannot go with {what}: {_DIAGONAL}; {how}")
    for on, what in ((config.padded, "a padding mask (real lengths, a paged cache or packed THD tokens)"),
                     (config.alibi, "ALiBi")):  # fmt: skip
        if on:
            yield FieldError("variant", f"{said} cannot go with {what}: cuDNN refuses a score_mod beside it")


def modifier_edits(config: SdpaConfig) -> list[dict]:
    """explain's edits of a score modifier beside a mask cuDNN refuses with it: the same attention
    with the causal mask (and a window) written inside the modifier, and the padding off; and a
    softcap-causal variant without its window, whose comparison of positions with a number some
    cuDNN versions decline on some GPUs (every engine of 9.19 on Hopper: known_issues.py)."""
    if config.variant == "none" or any(f.problem(getattr(config, f.name)) for f in FIELDS):
        return []
    same, edits = inside(config), []
    if same:
        edits.append({"variant": same, "causal": "none", "window": None})
    v = config.modifier
    if v.window and v.cap is not None:
        edits.append({"variant": v.text.rsplit(",", 1)[0]})
    if config.padded:
        edits.append({"seq_lens_q": None, "seq_lens_kv": None, "page_size": None, "layout": "BSHD"})
    return edits


def moved_inside(config: SdpaConfig, edited: SdpaConfig) -> bool:
    """Whether `edited` is `config` with its causal mask written inside its score modifier: the
    same attention (explain ranks it as an edit that leaves the result as it was)."""
    same = None if any(f.problem(getattr(config, f.name)) for f in FIELDS) else inside(config)
    return same is not None and edited == config.replace(variant=same, causal="none", window=None)


def modifier_fits(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """A prefix within the keys; documents that tile the sequence (queries and keys alike)."""
    if config.variant == "none" or {"variant", "s_q", "s_kv"} & bad:
        return
    v = config.modifier
    if v.prefix is not None and v.prefix > config.s_kv:
        yield FieldError("variant", f"prefix-lm's prefix of {v.prefix} is longer than s_kv ({config.s_kv})")
    if v.documents and (config.s_q != config.s_kv or sum(v.documents) != config.s_q):
        yield FieldError(
            "variant",
            f"document lengths must add up to the sequence length, with s_q = s_kv (got {sum(v.documents)} "
            f"for s_q {config.s_q}, s_kv {config.s_kv})",
        )


def recipe_fits(config: SdpaConfig, bad: set[str]) -> Iterator[FieldError]:
    """An input recipe the layout and dtype can take (inputs.problems)."""
    if not {"inputs", "layout", "dtype"} & bad:
        yield from (FieldError("inputs", message) for message in recipe_problems(config))


def fits_in_memory(config: SdpaConfig, bad: set[str], gpu_memory_bytes: int) -> Iterator[FieldError]:
    """The estimate of a checked run against the GPU's memory, said at the batch."""
    if (SHAPE | {"dtype"}) & bad or config.dtype not in DTYPES:
        return
    need = config.memory_estimate()
    if need > gpu_memory_bytes:
        yield FieldError(
            "b",
            f"this run needs about {format_bytes(need)} of GPU memory but the GPU has "
            f"{format_bytes(gpu_memory_bytes)}; lower b, heads or sequence lengths",
        )


RULES: tuple[Rule, ...] = (
    heads_divide,
    bottom_right_fits,
    window_fits,
    lengths_fit,
    lengths_pair,
    pages_fit,
    out_dtype_for_fp8,
    deterministic_needs_backward,
    modifier_alone,
    modifier_fits,
    recipe_fits,
)
