"""The device tensors each pass reads and writes, by the names its graph gives them: drawn from
one seed as the reference draws them (the input recipe's seed where it names one), laid out as
the configuration stores them (layout, pages, packed tokens, padded strides), the parts no
output may read filled as the recipe asks (recipes.py), the workspace a plan needs, and the dropout
mask cuDNN draws (its check graph run once)."""

from __future__ import annotations

from typing import Any

from ..model.config import SdpaConfig
from ..model.inputs import recipe_of
from ..model.tensor_plan import ROW_OUTPUTS, tensor_plan
from . import fp8, storage
from .graph import SdpaGraph, build
from .recipes import fill_unused, with_gaps
from .reference import empty, make_inputs, random_d_o


def workspace(torch: Any, g: SdpaGraph) -> Any:
    return torch.empty(max(g.workspace_bytes, 1), dtype=torch.uint8, device="cuda")


def dropout_mask(built: Any, handle: Any) -> Any:
    """The dropout mask cuDNN draws for the forward `built` (a passes.BuiltPass), (b, h_q, s_q,
    s_kv) of 0 and 1: its check graph (the same graph, also dumping the mask it draws) run once
    on its tensors, its outputs written to scratch copies. The timed graph does not dump: writing
    the mask would slow it. The check graph runs the engine and knobs of the plan being checked:
    an engine maps the Philox stream to positions its own way, so another engine's mask need not
    be this plan's (a decode shape, s_q=1, may get a different engine once the graph also dumps).
    Where cuDNN will not build that plan for it, the note says the mask came from another engine.
    Its count of ones is kept (`built.mask_ones`): a mask far short of what the dropout keeps is
    not the one the kernel applied (measure.mask_shortfall)."""
    import torch

    config, data = built.graph.config, built.data
    # zeros, not empty: the graph writes only the positions the masks keep, and memory a poisoned
    # output once held would put NaN where the reference multiplies a masked weight by the mask
    dump = torch.zeros((config.b, config.h_q, config.s_q, config.s_kv), dtype=torch.float32, device="cuda")
    o = data["o"]  # scratch of o's strides (padded strides have gaps, which empty_like would close)
    data = {
        **data,
        "o": torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device=o.device),
        "rng_dump": dump,
    }
    if "stats" in data:
        data["stats"] = torch.empty_like(data["stats"])
    chosen = next((p for p in built.graph.plans if p.index == built.graph.chosen), None)
    same = chosen if chosen and chosen.engine_id is not None else None
    check = build(config, handle, rng_dump=True, every_plan=False, same_as=same)
    if same and check.pinned_index is None:
        built.check_notes = (
            f"dropout: the mask the reference applies came from the check graph's own plan, not from "
            f"{chosen.name}'s engine ({check.pin_error or 'not built for it'}): where the engines map "
            "the random stream differently, a mismatch is the check's, not cuDNN's",
        )
    check.graph.execute(check.variant_pack(data), workspace(torch, check), handle=handle)
    torch.cuda.synchronize()
    built.mask_ones = float(dump.sum().item())  # judged against the dropout (measure.py)
    return dump


def device_tensors(config: SdpaConfig, device: str, seed: int) -> dict[str, Any]:
    """Everything the forward graph reads and writes, by name: q, k, v, o, and the stats,
    lengths, bias, dropout seed and FP8 scales when the config has them. `seed`: the run's (the
    recipe's own where it names one)."""
    import torch

    seed = recipe_of(config).seed_for(seed)
    q, k, v, bias = make_inputs(config, device, seed)
    data = {"q": q, "k": k, "v": v}
    with_gaps(config, data, ("q", "k", "v"))
    if config.fp8:
        fp8.forward_scales(config, data, device)
    for spec in tensor_plan(config).writes:  # o, and the stats or the row max and sum of exponents
        if spec.name in ("o", "stats", *ROW_OUTPUTS):
            data[spec.name] = empty(torch, spec, device)
    if config.sink:  # each head's learned sink logit, drawn after q, k, v and the bias
        gen = torch.Generator(device=device).manual_seed(seed + 2)
        data["sink_token"] = torch.randn((1, config.h_q, 1, 1), generator=gen, device=device)
    if bias is not None:
        data["bias"] = bias
    if config.dropout:
        data["seed"] = torch.full((1, 1, 1, 1), config.dropout_seed, dtype=torch.int64, device=device)
        data["offset"] = torch.zeros((1, 1, 1, 1), dtype=torch.int64, device=device)
    if config.padded:
        for name, side in (("seq_len_q", 0), ("seq_len_kv", 1)):
            lens = [config.lengths(bi)[side] for bi in range(config.b)]
            data[name] = torch.tensor(lens, dtype=torch.int32, device=device).view(config.b, 1, 1, 1)
    storage.physical(config, data, ("q", "k", "v", "o"), seed)
    fill_unused(config, data, ("q", "k", "v", "bias"))
    return data


def backward_tensors(config: SdpaConfig, forward: dict[str, Any], device: str, seed: int) -> dict[str, Any]:
    """The backward's tensors: the forward's (q, k, v, o, stats, options) shared, a seeded output
    gradient dO, and dQ, dK, dV; for FP8 also the backward's scales and amax outputs."""
    import torch

    data = dict(forward)
    seed = recipe_of(config).seed_for(seed)
    data["dO"] = random_d_o(config, device, seed + 1)
    with_gaps(config, data, ("dO",))
    if config.fp8:
        data["dO"] = fp8.backward_scales(config, data, data["dO"], device)
    for spec in tensor_plan(config, backward=True).writes:
        if spec.name in ("dQ", "dK", "dV"):
            data[spec.name] = empty(torch, spec, device)
    if config.sink:
        data["dSink_token"] = torch.empty((1, config.h_q, 1, 1), dtype=torch.float32, device=device)
    storage.physical(config, data, ("dO", "dQ", "dK", "dV"), seed)
    fill_unused(config, data, ("dO",))
    return data
