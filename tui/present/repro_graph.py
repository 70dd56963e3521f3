"""The reproduction script's graphs and tensors, written out from the engine's own builders: each
tensor's dims, strides and type from the tensor plan (model/tensor_plan.py), each SDPA keyword
from the one function that sets them (engine/keywords.py), the inputs drawn in the engine's
order. A GPU test proves the result builds the engine's graph JSON; nothing here is a second
engine, only its values written as literals."""

from __future__ import annotations

from typing import Any

from ..engine.keywords import UnsupportedOption, op_name, sdpa_kwargs
from ..model.config import SdpaConfig
from ..model.inputs import recipe_of, spare_pages
from ..model.tensor_plan import BACKWARD_AMAX, RAGGED_SIDE, TensorSpec, drawn_inputs, is_packed, tensor_plan
from .repro_inputs import BACKWARD_NAMES, FORWARD_NAMES, filled, filling, shaping, unfilled_logical

WIDTH, PROSE = 120, 96  # the script's code lines, and its prose
CUDNN_TYPES = {"fp16": "HALF", "bf16": "BFLOAT16", "fp8_e4m3": "FP8_E4M3", "fp32": "FLOAT",
               "int32": "INT32", "int64": "INT64"}  # fmt: skip
TORCH_TYPES = {"fp16": "float16", "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp32": "float32",
               "int32": "int32", "int64": "int64"}  # fmt: skip


class Name:
    """A variable of the script, written as its name where a keyword's value is a tensor."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


class Code(Name):
    """An option's value written as code (the score modifier's object): not a tensor, so it keeps
    its place among the options, where the graph's JSON has it."""


def literal(value: Any) -> str:
    """A keyword's value as the script writes it: tensors by name, cuDNN's enums by member."""
    if type(value).__module__.startswith("cudnn"):
        return f"cudnn.{value!r}"
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(v) for v in value) + ")"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def call(head: str, args: list[str], indent: str = "    ") -> list[str]:
    """`head(args)` on one line where it fits, else its arguments carried on under the first."""
    lines, at = [f"{indent}{head}("], len(indent) + len(head) + 1
    for i, arg in enumerate(args):
        text = arg + (")" if i == len(args) - 1 else ",")
        if len(lines[-1]) + 1 + len(text) > WIDTH and not lines[-1].endswith("("):
            lines.append(" " * at + text)
        else:
            lines[-1] += ("" if lines[-1].endswith("(") else " ") + text
    return lines


def name_tuple(names: tuple[str, ...]) -> str:
    """A tuple of names as the script writes it."""
    return "(" + ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "") + ")"


def ints(values: list[int]) -> str:
    """A list of whole numbers as the script writes it: `[4096] * 64` where they are all one."""
    if len(values) > 3 and len(set(values)) == 1:
        return f"[{values[0]}] * {len(values)}"
    return str(list(values))


def _dtype(name: str) -> str:
    return f"cudnn.data_type.{CUDNN_TYPES[name]}"


def _declare(spec: TensorSpec) -> list[str]:
    args = [f'name="{spec.name}"', f"dim={list(spec.dims)}", f"stride={list(spec.strides)}",
            f"data_type={_dtype(spec.dtype)}"]  # fmt: skip
    lines = call(f"{spec.name} = graph.tensor", args)
    if spec.offsets is not None:
        lines += _declare(spec.offsets) + [f"    {spec.name}.set_ragged_offset({spec.offsets.name})"]
    return lines


def _written(spec: TensorSpec, read: bool) -> list[str]:
    if read:  # a tensor the operation reads and fills in
        return [f"    {spec.name}.set_output(True)"]
    lines = [
        f"    {spec.name}.set_output(True).set_dim({list(spec.dims)}).set_stride({list(spec.strides)})"
        f".set_data_type({_dtype(spec.dtype)})"
    ]
    if spec.offsets is not None:
        lines += _declare(spec.offsets) + [f"    {spec.name}.set_ragged_offset({spec.offsets.name})"]
    return lines


def graph_function(config: SdpaConfig, backward: bool = False) -> list[str]:
    """`forward_graph(handle)` (with dropout: also `dump`, the graph that writes the mask it drew)
    or `backward_graph(handle)`: the graph as the engine declares it, returned with its tensors."""
    dump = config.dropout and not backward
    plan = tensor_plan(config, backward, rng_dump=dump)
    op = op_name(config, backward)
    lines = _graph_head(config, backward, dump) + _declarations(plan)
    try:
        keywords = sdpa_kwargs(config, {s.name: Name(s.name) for s in plan.reads}, op, plan.tokens)
    except UnsupportedOption as exc:  # the frontend would drop the keyword silently: the tool refuses
        return [*lines[:2], f'    sys.exit("{exc}: the tool refuses this configuration")']
    lines += _operation(plan, op, keywords)
    reads = {s.name for s in plan.reads}
    for spec in plan.writes:
        lines += _written(spec, spec.name in reads)
    names = sorted({n for s in (*plan.reads, *plan.writes) for n in (s.name, s.offsets and s.offsets.name) if n},
                   key=_order(plan))  # fmt: skip
    lines += call("return graph, dict", [f"{n}={n}" for n in names])
    return lines


def _graph_head(config: SdpaConfig, backward: bool, dump: bool) -> list[str]:
    """The function's line, its docstring and the graph with its data types."""
    io = "bf16" if config.o_dtype == "bf16" else "fp16"
    what = "backward" if backward else "forward"
    return [
        f"def {what}_graph(handle{', dump=False' if dump else ''}):",
        f'    """The {what} graph as the tool declares it'
        + (": with `dump`, it also writes the dropout mask it draws." if dump else ".")
        + '"""',
        *call(
            "graph = cudnn.pygraph",
            [
                f"io_data_type={_dtype(io)}",
                f"intermediate_data_type={_dtype('fp32')}",
                f"compute_data_type={_dtype('fp32')}",
                "handle=handle",
            ],
        ),  # fmt: skip
    ]


def _declarations(plan: Any) -> list[str]:
    """Each tensor the operation reads, declared; the dropout mask's only where `dump` asks."""
    lines: list[str] = []
    for spec in plan.reads:
        declared = _declare(spec)
        if spec.name == "rng_dump":  # only the dumping graph declares it
            declared[-1] += " if dump else None"
        lines += declared
    return lines


def _operation(plan: Any, op: str, keywords: dict[str, Any]) -> list[str]:
    """The SDPA call: its tensors by name first, then the options, as the graph's JSON has them."""
    lines: list[str] = []
    if "score_mod" in keywords:  # one ScoreMod for both callbacks: its bprop reads what it kept
        lines.append(f"    mod = {keywords['score_mod']!r}  # the variant's sub-graph (ScoreMod, above)")
        keywords.update(
            {
                k: Code(f"mod{'.bprop' * (k == 'score_mod_bprop')}")
                for k in keywords
                if k.startswith("score_mod")
            }
        )
    returned = ", ".join(name or "_" for name in plan.returns)
    first = ["name", *(k for k, v in keywords.items() if type(v) is Name)]  # then the options
    ordered = [*first, *(k for k in keywords if k not in first)]
    return lines + call(f"{returned} = graph.{op}", [f"{k}={literal(keywords[k])}" for k in ordered])


def _order(plan: Any) -> Any:
    specs = [s for spec in (*plan.reads, *plan.writes) for s in (spec, spec.offsets) if s is not None]
    at = {s.name: i for i, s in reversed(list(enumerate(specs)))}
    return lambda name: at[name]


# ---- the device tensors -------------------------------------------------------------------------


def _empty(spec: TensorSpec) -> str:
    return f"torch.empty_strided({spec.dims}, {spec.strides}, dtype=torch.{TORCH_TYPES[spec.dtype]}, device=DEVICE)"


def forward_tensors(config: SdpaConfig) -> list[str]:
    """`forward_tensors()`: what the forward reads and writes, by graph name, drawn and stored as
    the engine does it (engine/tensors.py), and the logical tensors the reference reads."""
    c = config
    drawn = drawn_inputs(c)
    lines = [
        "def forward_tensors():",
        '    """The forward\'s tensors by graph name, drawn and stored as the tool does; the logical q, k, v."""',
        "    gen = torch.Generator(DEVICE).manual_seed(SEED)",
        "    data = {}",
    ]
    for name in ("q", "k", "v", "bias"):
        if name in drawn:
            s = drawn[name]
            lines.append(
                f'    data["{name}"] = drawn({s.dims}, {s.strides}, torch.{TORCH_TYPES[s.dtype]}, gen)'
            )
    lines += shaping(c)
    if c.fp8:
        lines += [
            "    logical = {}",
            '    for name in ("q", "k", "v"):  # scaled per tensor by 448/amax, rounded to E4M3',
            '        data[name], data[f"descale_{name}"] = quantised(data[name])',
            '        logical[name] = data[name].float() * data[f"descale_{name}"]',
            f"    scale_s = 448.0 * (1 - {c.dropout!r})  # the softmax weights' bound",
            "    data.update(scale_s=scalar(scale_s), descale_s=scalar(1 / scale_s), scale_o=scalar(1.0))",
            '    data["amax_o"] = scalar(0.0)',
        ]
    else:
        lines.append(unfilled_logical(c))
    for spec in tensor_plan(c).writes:
        if spec.name in ("o", "stats", "score_max", "score_sum_exp"):
            lines.append(f'    data["{spec.name}"] = {_empty(spec)}')
    if c.sink:
        lines += [
            "    sinks = torch.Generator(DEVICE).manual_seed(SEED + 2)  # each head's sink logit",
            f'    data["sink_token"] = torch.randn((1, {c.h_q}, 1, 1), generator=sinks, device=DEVICE)',
        ]
    if c.dropout:
        lines += [
            f'    data["seed"] = torch.full((1, 1, 1, 1), {c.dropout_seed}, dtype=torch.int64, device=DEVICE)',
            '    data["offset"] = torch.zeros((1, 1, 1, 1), dtype=torch.int64, device=DEVICE)',
        ]
    if c.padded:
        lines += [
            '    for name, lens in (("seq_len_q", LENS_Q), ("seq_len_kv", LENS_KV)):',
            "        data[name] = torch.tensor(lens, dtype=torch.int32, device=DEVICE).view(-1, 1, 1, 1)",
        ]
    if c.paged:
        lines += [
            "    table = page_table()",
            '    data["k"], data["v"] = to_pages(data["k"], table), to_pages(data["v"], table)',
            f'    data["paged_attention_k_table"] = data["paged_attention_v_table"] = table.view({c.b}, 1, -1, 1)',
        ]
    if c.packed:  # a paged cache's K and V stay pools
        lines += _packing(tuple(n for n in ("q", "k", "v", "o") if is_packed(c, n)))
    lines += filling(c, FORWARD_NAMES)
    lines.append("    return data, logical")
    return lines


def backward_tensors(config: SdpaConfig) -> list[str]:
    """`backward_tensors(data, logical)`: the forward's tensors shared, a seeded dO (from SEED + 1),
    dQ, dK, dV; for FP8 the backward's scales and amax outputs."""
    c = config
    d_o = drawn_inputs(c)["dO"]
    lines = [
        "def backward_tensors(data, logical):",
        '    """The backward\'s tensors: the forward\'s, a seeded output gradient dO, and dQ, dK, dV."""',
        "    data = dict(data)",
        f"    d_o = drawn({d_o.dims}, {d_o.strides}, torch.{TORCH_TYPES[d_o.dtype]}, "
        "torch.Generator(DEVICE).manual_seed(SEED + 1))",
    ]
    if c.fp8 and c.o_dtype == "fp8_e4m3":
        lines += ['    data["dO"], data["descale_dO"] = quantised(d_o)',
                  '    logical["dO"] = data["dO"].float() * data["descale_dO"]']  # fmt: skip
    elif c.fp8:
        lines += [f'    data["dO"], data["descale_dO"] = d_o.to(torch.{TORCH_TYPES[c.o_dtype]}), scalar(1.0)',
                  '    logical["dO"] = data["dO"]']  # fmt: skip
    else:
        lines += ['    data["dO"] = logical["dO"] = d_o']
    if filled(c) and not (c.fp8 and c.o_dtype == "fp8_e4m3"):
        lines.append('    logical["dO"] = logical["dO"].clone()  # the reference\'s: the fill is data\'s')
    if c.fp8:
        lines += [
            '    data["descale_o"] = scalar(1 / data["scale_o"].item())',
            '    for name in ("scale_dQ", "scale_dK", "scale_dV", "scale_dP", "descale_dP"):',
            "        data[name] = scalar(1.0)",
            f"    for name in {name_tuple(BACKWARD_AMAX)}:",
            "        data[name] = scalar(0.0)",
        ]
    for spec in tensor_plan(c, backward=True).writes:
        if spec.name in ("dQ", "dK", "dV"):
            lines.append(f'    data["{spec.name}"] = {_empty(spec)}')
    if c.sink:
        lines.append(f'    data["dSink_token"] = torch.empty((1, {c.h_q}, 1, 1), device=DEVICE)')
    if c.packed:
        lines += _packing(("dO", "dQ", "dK", "dV"))
    lines += filling(c, BACKWARD_NAMES)
    lines.append("    return data")
    return lines


def _packing(names: tuple[str, ...]) -> list[str]:
    """The lines that pack `names` at their side's real lengths, with their ragged offsets."""
    pairs = ", ".join(f'("{n}", {"LENS_Q" if RAGGED_SIDE[n] == 0 else "LENS_KV"})' for n in names)
    return [
        f"    for name, lens in ({pairs}):",
        '        data[name], data[f"{name}_offsets"] = packed(data[name], lens)',
    ]


def storage_helpers(config: SdpaConfig) -> list[str]:
    """The helpers the tensors need: drawing, and where the configuration has them, FP8 scaling,
    lengths, pages and packed tokens."""
    c = config
    lines = [
        "def drawn(dims, strides, dtype, gen):  # N(0, 1) in logical order, stored with the layout's strides",
        "    t = torch.empty_strided(dims, strides, dtype=dtype, device=DEVICE)",
        "    return t.copy_(torch.randn(dims, generator=gen, device=DEVICE))",
        "",
    ]
    if recipe_of(c).gap:  # padded strides: the memory between the rows holds the fill
        lines[:2] = [
            "def drawn(dims, strides, dtype, gen):  # N(0, 1) in logical order, stored with the strides; FILL between",
            "    size = 1 + sum((n - 1) * s for n, s in zip(dims, strides))",
            "    t = torch.full((size,), FILL, dtype=dtype, device=DEVICE).as_strided(dims, strides)",
        ]
    if c.fp8:
        lines += [
            "def scalar(value):  # a scale or amax tensor of an FP8 graph",
            "    return torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=DEVICE)",
            "",
            "def quantised(x):",
            '    """x * 448/amax(x) rounded to E4M3, and the descale tensor that undoes it."""',
            "    scale = 448.0 / x.abs().max().item()",
            "    return torch.empty_like(x, dtype=torch.float8_e4m3fn).copy_(x * scale), scalar(1 / scale)",
            "",
        ]
    if c.paged:
        lines += _page_helpers(c)
    if c.packed:
        lines += [
            "def packed(dense, lens):",
            '    """(tokens, h, d): each sequence\'s real tokens one after another; its start offsets (b + 1)."""',
            "    raw = dense.view(torch.uint8) if dense.element_size() == 1 else dense",
            "    tokens = torch.cat([raw[i, :, :n].transpose(0, 1) for i, n in enumerate(lens)])",
            "    starts = [0] + [sum(lens[: i + 1]) * tokens[0].numel() for i in range(len(lens))]",
            "    offsets = torch.tensor(starts, dtype=torch.int32, device=DEVICE).view(-1, 1, 1, 1)",
            *(
                [
                    "    tail = tokens.new_empty((len(lens) * dense.shape[2] - len(tokens), *tokens.shape[1:]))",
                    "    tokens = torch.cat([tokens, fill(tail)])  # the buffer the dims declare: FILL after the tokens",
                ]
                if filled(c)
                else []
            ),
            "    return tokens.view(dense.dtype), offsets",
            "",
            "def unpacked(tokens, lens, s):",
            '    """Logical (b, h, s, d) of packed tokens, zero past each sequence\'s real length."""',
            "    out = tokens.new_zeros((len(lens), s, *tokens.shape[1:]))",
            "    for i, n in enumerate(lens):",
            "        out[i, :n] = tokens[sum(lens[:i]) : sum(lens[: i + 1])]",
            "    return out.transpose(1, 2)",
            "",
        ]
    return lines


def _page_helpers(c: SdpaConfig) -> list[str]:
    spares = spare_pages(c) > 0
    shuffle = ["    random.Random(SEED).shuffle(ids)  # dealt out as a serving allocator leaves them"]
    return [
        f"PAGE, PER_SEQ = {c.page_size}, {c.pages_per_sequence()}  # tokens a page; pages a sequence's table row",
        "NEEDED = [-(-n // PAGE) for n in LENS_KV]  # the pages each sequence holds",
        "",
        "def page_table():",
        '    """Each sequence\'s pages in the pool, in token order; a row past its last page '
        + ("points at a spare page of the fill." if spares else "repeats that page.")
        + '"""',
        "    ids = list(range(sum(NEEDED)))",
        *(shuffle if c.page_order == "shuffled" else []),
        "    rows = [ids[sum(NEEDED[:i]) : sum(NEEDED[: i + 1])] for i in range(B)]",
        *(
            [
                "    spares = iter(range(sum(NEEDED), B * PER_SEQ))  # the fill's pages: one a table entry past the last",
                "    rows = [row + [next(spares) for _ in range(PER_SEQ - len(row))] for row in rows]",
            ]
            if spares
            else ["    rows = [row + row[-1:] * (PER_SEQ - len(row)) for row in rows]"]
        ),
        "    return torch.tensor(rows, dtype=torch.int32, device=DEVICE)",
        "",
        "def to_pages(dense, table):",
        '    """The pool (pages, h, PAGE, d): each sequence\'s tokens, page by page, where its table row says."""',
        "    blocks = dense.new_zeros((B, dense.shape[1], PER_SEQ * PAGE, dense.shape[3]))",
        "    blocks[:, :, :S_KV] = dense",
        "    used = torch.arange(PER_SEQ, device=DEVICE) < torch.tensor(NEEDED, device=DEVICE).view(-1, 1)",
        f"    pool = dense.new_zeros(({'B * PER_SEQ' if spares else 'sum(NEEDED)'}, dense.shape[1], PAGE, dense.shape[3]))",
        "    pool[table[used].long()] = blocks.unflatten(2, (PER_SEQ, PAGE)).transpose(1, 2)[used]",
        "    return pool",
        "",
    ]
