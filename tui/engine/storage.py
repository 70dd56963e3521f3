"""Where attention's tensors live when they are not dense (b, h, s, d) blocks: a paged KV cache,
and packed (THD) tokens.

The reference and the peers always compute on logical (b, h, s, d) tensors. The graph reads
storage: K and V as pools of pages found through a page table per sequence, or every
sequence's real tokens packed one after another at ragged offsets. `physical()` turns the
drawn logical tensors into that storage, and `logical()` reads storage back, gathering pages
through the table and unpacking tokens at their offsets, so a table or offset the graph
misreads shows up as an error against the reference.
"""

from __future__ import annotations

import random
from typing import Any

from ..model.config import DTYPE_BYTES, SdpaConfig
from ..model.inputs import recipe_of, spare_pages
from ..model.tensor_plan import PAGE_TABLES, RAGGED_SIDE, is_packed, pool_dims
from . import fp8
from .recipes import fill, fill_value

# The tensors packed at ragged offsets, and the side whose real lengths they follow (0: q, 1: k/v)


# ---- a paged KV cache ----------------------------------------------------------------------
def pages_needed(config: SdpaConfig) -> list[int]:
    """Pages each sequence holds: enough for its real key/value length, no more."""
    return config.pages_needed()


def page_table(config: SdpaConfig, seed: int = 0) -> list[list[int]]:
    """Each sequence's pool pages, in token order (b rows of pages_per_sequence). The pool holds
    only the pages the real lengths need; `shuffled` deals them out as a serving allocator leaves
    them, seeded. A row past its sequence's last page repeats that page (never read: the padding
    mask stops at the real length); with an input recipe's fill, it points at a spare page of its
    own instead, which holds the fill (recipes.fill_unused)."""
    needed = pages_needed(config)
    ids = list(range(sum(needed)))
    if config.page_order == "shuffled":
        random.Random(seed).shuffle(ids)
    spares = iter(range(sum(needed), sum(needed) + spare_pages(config)))
    rows, at = [], 0
    for n in needed:
        row = ids[at : at + n]
        at += n
        past = config.pages_per_sequence() - n
        rows.append(row + ([next(spares) for _ in range(past)] if spare_pages(config) else [row[-1]] * past))
    return rows


def pool_shape(config: SdpaConfig, d: int) -> tuple[int, int, int, int]:
    """The pool that holds the pages the real lengths need, and the spare pages (pool_dims)."""
    return pool_dims(config, d, sum(pages_needed(config)) + spare_pages(config))


def to_pages(torch: Any, config: SdpaConfig, dense: Any, table: Any) -> Any:
    """The pool holding `dense` (b, h_kv, s_kv, d) page by page where `table` says."""
    b, h, s, d = dense.shape
    size, per_seq = config.page_size or 1, config.pages_per_sequence()
    pool = torch.zeros(pool_shape(config, d), dtype=dense.dtype, device=dense.device)
    padded = torch.zeros((b, h, per_seq * size, d), dtype=dense.dtype, device=dense.device)
    padded[:, :, :s] = dense
    blocks = padded.unflatten(2, (per_seq, size)).permute(0, 2, 1, 3, 4)  # (b, pages, h, size, d)
    for i, n in enumerate(pages_needed(config)):
        pool[table[i, :n].long()] = blocks[i, :n]
    return pool


def gather(torch: Any, config: SdpaConfig, pool: Any, table: Any) -> Any:
    """Logical (b, h_kv, s_kv, d) from a pool through the page table, as the graph must read it."""
    size = config.page_size or 1
    j = torch.arange(config.s_kv, device=pool.device)
    pages = table.view(config.b, -1)[:, j // size].long()  # (b, s_kv): the page of each token
    slots = (j % size).expand(config.b, -1)
    by_token = pool.transpose(1, 2)[pages, slots]  # (b, s_kv, h, d): each token from its page
    return by_token.transpose(1, 2)


# ---- packed tokens (THD) -------------------------------------------------------------------
def token_index(torch: Any, config: SdpaConfig, side: int, device: Any) -> Any:
    """Where each packed token sits in a padded (b * s, ...) token axis."""
    s = config.s_kv if side else config.s_q
    return torch.cat([torch.arange(config.lengths(i)[side], device=device) + i * s for i in range(config.b)])


def ragged_offsets(config: SdpaConfig, name: str, heads: int, d: int) -> list[int]:
    """Element offset of each sequence's first token in a packed tensor, then the total (b + 1)."""
    side, offsets = RAGGED_SIDE[name], [0]
    for i in range(config.b):
        offsets.append(offsets[-1] + config.lengths(i)[side] * heads * d)
    return offsets


def pack(torch: Any, config: SdpaConfig, dense: Any, name: str) -> Any:
    """A packed (tokens, h, d) tensor of the real tokens of a logical (b, h, s, d) one."""
    b, h, s, d = dense.shape
    tokens = dense.transpose(1, 2).reshape(b * s, h, d)  # BSHD memory: a view of the tokens, no copy
    raw = tokens.view(torch.uint8) if tokens.element_size() == 1 else tokens  # E4M3 has no index kernels
    picked = raw[token_index(torch, config, RAGGED_SIDE[name], dense.device)]
    return picked.view(dense.dtype) if tokens.element_size() == 1 else picked


def packed_with_fill(torch: Any, config: SdpaConfig, packed: Any, name: str) -> Any:
    """With an input recipe's fill, a packed tensor in a buffer of every token the graph's dims
    declare (b * s), its real tokens first and the fill after them; as it is without one."""
    recipe = recipe_of(config)
    if recipe.pad is None:
        return packed
    s = logical_dims(config, name)[2]
    full = fill(packed.new_empty((config.b * s, *packed.shape[1:])), fill_value(recipe))
    full[: len(packed)] = packed
    return full


def unpack(torch: Any, config: SdpaConfig, packed: Any, name: str, dims: tuple[int, ...]) -> Any:
    """Logical (b, h, s, d), zero past each sequence's real length, of a packed tensor."""
    b, h, s, d = dims
    raw = packed.view(torch.uint8) if packed.element_size() == 1 else packed
    tokens = torch.zeros((b * s, h, d), dtype=raw.dtype, device=packed.device)
    index = token_index(torch, config, RAGGED_SIDE[name], packed.device)
    tokens[index] = raw[: len(index)]  # a buffer with a fill holds more after the real tokens
    out = tokens.view(packed.dtype) if packed.element_size() == 1 else tokens
    return out.view(b, s, h, d).transpose(1, 2)  # logical (b, h, s, d) over BSHD memory


def logical_dims(config: SdpaConfig, name: str) -> tuple[int, int, int, int]:
    return {
        "q": config.q_dims,
        "dQ": config.q_dims,
        "k": config.k_dims,
        "dK": config.k_dims,
        "v": config.v_dims,
        "dV": config.v_dims,
        "o": config.o_dims,
        "dO": config.o_dims,
    }[name]


# ---- the two views of a pass's tensors -------------------------------------------------------
def physical(config: SdpaConfig, data: dict[str, Any], names: tuple[str, ...], seed: int = 0) -> None:
    """Turn the logical tensors `names` of `data` into the storage the graph reads: K and V into
    pools with their page tables, packed tokens with their ragged offsets."""
    import torch

    device = data[names[0]].device
    if config.paged and "k" in names:
        rows = page_table(config, seed)
        table = torch.tensor(rows, dtype=torch.int32, device=device).view(config.b, 1, -1, 1)
        for name, key in PAGE_TABLES.items():
            data[name] = to_pages(torch, config, data[name], table.view(config.b, -1))
            data[key] = table
    for name in names:
        if is_packed(config, name):
            data[name] = packed_with_fill(torch, config, pack(torch, config, data[name], name), name)
            _, h, _, d = logical_dims(config, name)
            offsets = ragged_offsets(config, name, h, d)
            data[f"{name}_offsets"] = torch.tensor(offsets, dtype=torch.int32, device=device).view(
                -1, 1, 1, 1
            )


def logical(config: SdpaConfig, data: dict[str, Any], name: str) -> Any:
    """A tensor of the graph as the logical (b, h, s, d) numbers it stands for: FP8 dequantised,
    pages gathered through the page table, packed tokens unpacked at their offsets."""
    import torch

    values = fp8.values(config, data, name)
    if config.paged and name in PAGE_TABLES:
        return gather(torch, config, values, data[PAGE_TABLES[name]])
    if is_packed(config, name):
        return unpack(torch, config, values, name, logical_dims(config, name))
    return values


# ---- what the storage saves ----------------------------------------------------------------
def packing_saves(config: SdpaConfig) -> tuple[int, int]:
    """(bytes of q, k, v and o packed, bytes padded to s_q and s_kv): what THD saves."""
    size, out = DTYPE_BYTES.get(config.dtype, 2), DTYPE_BYTES.get(config.o_dtype, 2)
    q_side = config.h_q * (config.d_qk * size + config.d_v * out)
    kv_side = 0 if config.paged else config.h_kv * (config.d_qk + config.d_v) * size  # pools: pages
    packed = config.real_tokens(0) * q_side + config.real_tokens(1) * kv_side
    padded = config.b * (config.s_q * q_side + config.s_kv * kv_side)
    return packed, padded
