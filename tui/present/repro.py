"""The reproduction script: one Python file, cudnn and torch only, that a bug report can carry.

It reads top to bottom like the tutorial the tool grew from: the configuration's sizes, its
tensors drawn as the engine draws them, its graph declared with the literal dims, strides and
keywords the engine passes (repro_graph.py writes them from the engine's own builders), the
phases, one execution, the reference written out for this configuration's masks, the tool's
check and a kernel time. Only what the configuration uses is in it. A GPU test proves it against
the engine (the same graph JSON, the same error); CPU tests run its parts beside the engine's.
"""

from __future__ import annotations

import json
import textwrap

from ..engine.fp8 import BACKWARD_DELAYED, FORWARD_DELAYED, OUTPUT_SCALES
from ..engine.reference import alibi_slopes
from ..engine.tolerances import (
    ATOL_FLOOR_FP32_UNITS,
    GRAD_TOLERANCES,
    STORED_O_SIGMAS,
    TOLERANCES,
    UNIT_ROUNDOFF,
)
from ..model.config import SdpaConfig
from ..model.inputs import NORMAL, recipe_of
from ..model.pins import parse
from ..model.tensor_plan import RAGGED_SIDE
from .repro_graph import (
    PROSE,
    WIDTH,
    backward_tensors,
    forward_tensors,
    graph_function,
    ints,
    name_tuple,
    storage_helpers,
)
from .repro_inputs import recipe_constants, recipe_helpers
from .repro_reference import heads_step, reference, reference_grads
from .repro_variant import reference_constants, score_mod_class

# The most lines a script may have: a forward; one whose inputs need more written out (a paged
# cache's table and pool, packed tokens, real lengths, the dropout mask cuDNN drew, a score
# modifier's sub-graph); a training step or FP8.
# An input recipe other than the default writes its steps too (repro_inputs.py): RECIPE_LINES more.
FORWARD_LINES, STORED_LINES, TRAINING_LINES, RECIPE_LINES = 150, 200, 300, 40


def budget(config: SdpaConfig) -> int:
    """The most lines the script of `config` may have."""
    more = RECIPE_LINES if config.inputs != NORMAL else 0
    if config.backward or config.fp8:
        return TRAINING_LINES + more
    return more + (
        STORED_LINES if config.padded or config.dropout or config.variant != "none" else FORWARD_LINES
    )


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cudnn-sdpa-explorer")
    except PackageNotFoundError:
        return "unknown"


def script(config: SdpaConfig, seed: int = 0, finding: str = "") -> str:
    """The script for `config` (its forward, and with `backward` the training step's backward):
    built, run, checked against fp32 and timed; its last line is `RESULT {json}`. `finding` says
    what it reproduces (a crash, for an upstream report)."""
    c = config
    seed = recipe_of(c).seed_for(seed)  # the recipe's own seed, where it names one
    parts = [
        _docstring(c, finding),
        _imports(c),
        _constants(c, seed) + recipe_constants(c),
        recipe_helpers(c),
        storage_helpers(c),
        score_mod_class(c),
        graph_function(c),
        graph_function(c, backward=True) if c.backward else [],
        _building(c),
        forward_tensors(c),
        backward_tensors(c) if c.backward else [],
        reference(c),
        reference_grads(c) if c.backward else [],
        _checking(c),
        _timing(),
        _main(c),
    ]
    text = "\n\n".join("\n".join(_wrapped(part)).strip("\n") for part in parts if part)
    return text.replace("\n\n\n", "\n\n") + "\n"


def _wrapped(lines: list[str]) -> list[str]:
    """A docstring line too long for the page, wrapped."""
    out = []
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        if len(line) > WIDTH and line.startswith('    """'):  # the title line stays whole
            out += textwrap.wrap(line.strip(), PROSE, initial_indent=indent, subsequent_indent=indent)
        else:
            out.append(line)
    return out


def _docstring(c: SdpaConfig, finding: str) -> list[str]:
    what = "forward and backward (a training step)" if c.backward else "forward"
    text = (
        f"From sdpa-explorer {tool_version()}; needs torch, a CUDA GPU and the cuDNN frontend. The tool's "
        "graph (its dims, strides, keywords), "
        + (f"the pinned plan {c.plan}" if c.plan else "the heuristic's plan")
        + ", a check against fp32 math on the same logical (b, h, s, d) tensors, kernel times. "
        "Exit 0 when all pass; RESULT {json} last; `python repro.py graph.json` writes the graph JSON."
    )
    body = ([*textwrap.wrap(f"What it reproduces: {finding}", PROSE), ""] if finding else []) + textwrap.wrap(
        text, PROSE
    )
    return ["#!/usr/bin/env python3", f'"""cuDNN SDPA {what}: {c.label()}', "", *body, '"""']


def _imports(c: SdpaConfig) -> list[str]:
    shuffled = c.paged and c.page_order == "shuffled"
    return ["import json", "import pathlib", *(["import random"] if shuffled else []), "import sys", "",
            "import cudnn", "import torch"]  # fmt: skip


def _constants(c: SdpaConfig, seed: int) -> list[str]:
    atol, rtol = TOLERANCES[c.dtype]
    lines = [
        f"SEED, DEVICE = {seed}, \"cuda\"  # the inputs' seed, as the tool's run had it",
        f"B, H_Q, H_KV, S_Q, S_KV, D_QK, D_V = {c.b}, {c.h_q}, {c.h_kv}, {c.s_q}, {c.s_kv}, {c.d_qk}, {c.d_v}",
        f"SCALE = {c.scale!r}  # attn_scale" + ("" if c.attn_scale else ": 1/sqrt(d_qk)"),
    ]
    if c.padded:
        lens = [c.lengths(i) for i in range(c.b)]
        lines.append(f"LENS_Q = {ints([q for q, _ in lens])}  # each sequence's real length")
        lines.append(f"LENS_KV = {ints([kv for _, kv in lens])}")
    if c.window:
        lines.append(f"WINDOW = {c.window}  # each query sees this many keys back")
    if c.dropout:
        lines.append(f"DROPOUT = {c.dropout!r}")
    lines += reference_constants(c)
    if heads_step(c) < c.h_q or c.backward:
        lines.append(
            f"HEADS = {heads_step(c)}  # query heads the reference takes at once (its scores' memory)"
        )
    if c.alibi:
        lines.append(f"SLOPES = {alibi_slopes(c.h_q)}  # ALiBi's, per head")
    share = "of max |reference|" if c.fp8 else "absolute"
    lines.append(
        f"ATOL, RTOL = {atol!r}, {rtol!r}  # the tool's tolerance of O ({share}; its floor never binds)"
    )
    if c.backward:
        g_atol, g_rtol = GRAD_TOLERANCES[c.dtype]
        lines.append(
            f"GRAD_ATOL, GRAD_RTOL = {g_atol!r}, {g_rtol!r}  # of the gradients (of max |reference|)"
        )
    if c.backward:
        lines.append(
            f"FLOOR = {ATOL_FLOOR_FP32_UNITS} * 2.0**-23  # a gradient atol's least: fp32 units of its size"
        )
        stored = STORED_O_SIGMAS * UNIT_ROUNDOFF.get(c.o_dtype, 2.0**-11)
        lines.append(
            f"STORED_O = {stored!r}  # dQ's, dK's least atol: O's rounding as stored, which the backward reads"
        )
    return lines


def _building(c: SdpaConfig) -> list[str]:
    pin = parse(c.plan) if c.plan else None
    lines = [
        "def executor(graph, tensors, data, handle" + (", pin=True" if pin and c.dropout else "") + "):",
        '    """The phases after validate() in the tool\'s order, then one execute() of the '
        + ("pinned plan" if pin else "plan picked")
        + ' on these tensors."""',
        "    graph.build_operation_graph()",
        f"    graph.create_execution_plans([{', '.join(f'cudnn.heur_mode.{m}' for m in c.heuristics)}])",
    ]
    lines += ["    graph.check_support()", "    graph.build_plans()"]
    if pin:
        knobs = ", ".join(f"cudnn.knob_type.{k}: {v}" for k, v in pin.knobs)
        body = [
            "    try:  # the pinned plan, after the heuristic's list; building it selects it for execute()",
            f"        graph.create_execution_plan({pin.engine_id}, {{{knobs}}})",
            "        graph.build_plan_at_index(graph.get_execution_plan_count() - 1)",
            "    except Exception as exc:",
            f'        sys.exit(f"pinned plan {pin.text()} is not in cuDNN {{cudnn.backend_version()}}: {{exc}}")',
        ]
        lines += ["    if pin:", *("    " + line for line in body)] if c.dropout else body
    lines += [
        "    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=DEVICE)",
        "    pack = {t: data[name] for name, t in tensors.items()"
        + (" if t is not None}" if c.dropout else "}"),
        "    return lambda: graph.execute(pack, workspace, handle=handle)",
        "",
        "def run_once(run, data, names):",
        '    """One execution, its outputs NaN before it: an element the plan never writes cannot pass."""',
        "    for t in (data[name] for name in names):",
        '        t.view(torch.uint8).fill_(0x7F) if t.element_size() == 1 else t.fill_(float("nan"))',
    ]
    if not c.fp8:
        lines[-2:] = ["    for name in names:", '        data[name].fill_(float("nan"))']
    lines += [
        "    run()",
        "    torch.cuda.synchronize()",
    ]
    if c.fp8:
        lines += [
            "",
            "def delayed_scaling(run, data, outputs):",
            '    """FP8 outputs\' scales: one execution with scale 1, then 448/amax of what it wrote."""',
            "    for scale, descale in outputs.values():",
            "        data[scale].fill_(1.0), descale and data[descale].fill_(1.0)",
            "    run_once(run, data, ())",
            "    for amax, (scale, descale) in outputs.items():",
            "        value = data[amax].item()",
            "        value = 448.0 / value if value > 0 and value == value else 1.0",
            "        data[scale].fill_(value), descale and data[descale].fill_(1 / value)",
        ]
    if c.dropout:
        lines += [
            "",
            "def dropout_mask(handle, data):",
            '    """The mask cuDNN draws: the forward defined again with `dump` writes it (zeros first)."""',
            "    graph, tensors = forward_graph(handle, dump=True)",
            "    graph.validate()",
            '    scratch = {name: torch.empty_like(data[name]) for name in ("o", "stats") if name in data}',
            '    dump = {**data, **scratch, "rng_dump": torch.zeros((B, H_Q, S_Q, S_KV), device=DEVICE)}',
            "    run_once(executor(graph, tensors, dump, handle"
            + (", pin=False" if pin else "")
            + "), dump, ())",
            '    return dump["rng_dump"]',
        ]
    return lines


def _checking(c: SdpaConfig) -> list[str]:
    rows = c.padded
    lines = [
        "def check(got, ref, atol, rtol" + (", rows=None" if rows else "") + "):",
        '    """max |got - ref|'
        + (" over the real rows" if rows else "")
        + ' (inf where not finite); passed when all are within atol + rtol * |ref|."""',
    ]
    if rows:
        lines += [
            "    if rows is not None:",
            "        got, ref = got[rows.expand(got.shape)], ref[rows.expand(ref.shape)]",
        ]
    lines += [
        "    finite = torch.isfinite(got) & torch.isfinite(ref)",
        "    err = torch.where(finite, (got.float() - ref).abs(), torch.inf)",
        "    passed = bool((finite & (err <= atol + rtol * ref.abs())).all())",
        '    return {"max_abs": err.max().item(), "atol": atol, "passed": passed}',
    ]
    if c.backward:
        lines += [
            "",
            "def grad_atol(ref, size, stored=0.0):  # a share of max |reference|, never below its floors",
            "    return max(GRAD_ATOL * max(ref.abs().max().item(), 1e-30), FLOOR * size, stored)",
        ]
    return lines


def _timing() -> list[str]:
    return [
        "def kernel_us(run, handle, n=20, replays=15):",
        '    """The median over replays of a CUDA graph of n executions, per execution: no host time in it."""',
        "    stream, graph = torch.cuda.Stream(), torch.cuda.CUDAGraph()",
        "    cudnn.set_stream(handle, stream.cuda_stream)",
        "    with torch.cuda.graph(graph, stream=stream):",
        "        for _ in range(n):",
        "            run()",
        "    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)",
        "    times = []",
        "    for _ in range(replays):",
        "        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)",
        "        start.record(), graph.replay(), end.record(), end.synchronize()",
        "        times.append(start.elapsed_time(end) * 1000 / n)",
        "    return sorted(times)[replays // 2]",
    ]


def _value(c: SdpaConfig, name: str) -> str:
    """How main() reads an output as the numbers it stands for."""
    out = f'data["{name}"]'
    fp8_out = c.fp8 and (name != "o" or c.o_dtype == "fp8_e4m3")
    if fp8_out and name in OUTPUT_SCALES:
        out = f'{out}.float() * (1.0 / data["{OUTPUT_SCALES[name]}"])'
    if c.packed and name in OUTPUT_SCALES:  # the outputs, packed as their side's tokens
        side = "LENS_KV, S_KV" if RAGGED_SIDE[name] else "LENS_Q, S_Q"
        out = f"unpacked({out}, {side})"
    return out


def _recipe(delayed: dict[str, tuple[str, str | None]]) -> str:
    """The engine's delayed scaling (amax -> the scale it sets, the descale that undoes it) as a literal."""
    pair = lambda scale, descale: f'("{scale}", {json.dumps(descale) if descale else None})'  # noqa: E731
    return "{" + ", ".join(f'"{amax}": {pair(*sets)}' for amax, sets in delayed.items()) + "}"


def _main(c: SdpaConfig) -> list[str]:
    rows_q, rows_kv = ("rows_q", "rows_kv") if c.padded else ("None", "None")
    extra = (
        ['logical["bias"]'] * (c.bias != "none")
        + ['data["sink_token"]'] * c.sink
        + ["mask"] * bool(c.dropout)
    )
    args = ", ".join(['logical["q"]', 'logical["k"]', 'logical["v"]', *extra])
    row_outputs = {"none": [], "stats": [("Stats", "stats")],
                   "max_sum_exp": [("Max", "score_max"), ("SumExp", "score_sum_exp")]}[c.softmax_out]  # fmt: skip
    written = ("o", *(key for _, key in row_outputs))
    lines = [
        "def main():",
        '    """The forward'
        + (", then the backward on what it wrote" if c.backward else "")
        + ': built, run, checked and timed."""',
        "    if not torch.cuda.is_available():",
        '        sys.exit(f"{sys.argv[0]}: torch sees no CUDA GPU, and cuDNN\'s SDPA runs on one")',
        "    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 reference",
        "    handle = cudnn.create_handle()",
        "    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)",
        "    data, logical = forward_tensors()",
        "    graph, tensors = forward_graph(handle)",
        "    graph.validate()  # the graph as cuDNN reads it: its JSON for a bug report",
        '    graphs = {"forward": str(graph)}',
        "    run = executor(graph, tensors, data, handle)",
    ]
    if c.fp8 and c.o_dtype == "fp8_e4m3":
        lines.append(f"    delayed_scaling(run, data, {_recipe(FORWARD_DELAYED)})")
    if c.dropout:
        lines.append("    mask = dropout_mask(handle, data)")
    lines += [
        f"    run_once(run, data, {name_tuple(written)})",
        f"    ref = reference({args})",
    ]
    if c.padded:
        lines += [
            '    rows_q = torch.arange(S_Q, device=DEVICE).view(1, 1, -1, 1) < data["seq_len_q"]  # the real rows',
            '    rows_kv = torch.arange(S_KV, device=DEVICE).view(1, 1, -1, 1) < data["seq_len_kv"]',
        ]
    rows = f", {rows_q}" if c.padded else ""
    atol = (lambda name: f'ATOL * ref["{name}"].abs().max().item()') if c.fp8 else (lambda name: "ATOL")
    lines.append(f'    checks = {{"O": check({_value(c, "o")}, ref["O"], {atol("O")}, RTOL{rows})}}')
    for name, key in row_outputs:
        lines.append(f'    checks["{name}"] = check(data["{key}"], ref["{name}"], {atol(name)}, RTOL{rows})')
    lines.append('    figures = {"checks": checks, "kernel_us": kernel_us(run, handle)}')
    if c.fp8:
        lines.append(
            '    figures.update(amax_o=data["amax_o"].item(), reference_max_abs=ref["O"].abs().max().item())'
        )
    if c.backward:
        lines += _main_backward(c, extra, rows_q, rows_kv)
    passed = 'all(check["passed"] for check in checks.values())'
    if c.backward and c.deterministic:
        passed += ' and figures["repeatable"]'
    lines += [
        f'    figures["passed"] = {passed}',
        "    print(__doc__.splitlines()[0])",
        '    print(f"cuDNN {cudnn.backend_version()}, {cudnn.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")',
        "    for name, c in checks.items():",
        "        print(f\"{name:6} max abs error {c['max_abs']:.3e} (atol {c['atol']:.3g}): {'PASS' if c['passed'] else 'FAIL'}\")",
        f"    print(f\"forward kernel time {{figures['kernel_us']:.2f}} us, {{{c.flops()} / figures['kernel_us'] / 1e6:.1f}} TFLOPS\")",
    ]
    if c.backward:
        lines += [
            "    print(f\"backward kernel time {figures['backward_kernel_us']:.2f} us, \"",
            f"          f\"{{{c.backward_flops()} / figures['backward_kernel_us'] / 1e6:.1f}} TFLOPS; \"",
            "          f\"two executions wrote the same bits: {figures['repeatable']}\")",
        ]
    lines += [
        "    if len(sys.argv) > 1:  # the graphs cuDNN was given, for a bug report",
        "        pathlib.Path(sys.argv[1]).write_text(json.dumps(graphs, indent=1))",
        '    print("RESULT " + json.dumps(figures))',
        '    sys.exit(0 if figures["passed"] else 1)',
        "",
        "",
        'if __name__ == "__main__":',
        "    main()",
    ]
    return lines


def _main_backward(c: SdpaConfig, extra: list[str], rows_q: str, rows_kv: str) -> list[str]:
    grads = ("dQ", "dK", "dV")
    args = ", ".join(['logical["q"]', 'logical["k"]', 'logical["v"]', 'logical["dO"]', *extra])
    lines = [
        "    graph, tensors = backward_graph(handle)",
        "    graph.validate()",
        '    graphs["backward"] = str(graph)',
        "    data = backward_tensors(data, logical)",
        "    run = executor(graph, tensors, data, handle)",
    ]
    if c.fp8:
        half = len(BACKWARD_DELAYED) // 2  # the recipe's entries, two lines of them
        rows = [dict(list(BACKWARD_DELAYED.items())[:half]), dict(list(BACKWARD_DELAYED.items())[half:])]
        lines += [
            "    delayed_scaling(run, data, {",
            *(f"        {_recipe(r)[1:-1]}," for r in rows),
            "    })",
        ]
    lines += [
        f"    run_once(run, data, {name_tuple(grads)})",
        f"    grads = reference_grads({args})",
        *(
            [
                '    real = {"q": rows_q, "dO": rows_q, "k": rows_kv, "v": rows_kv}  # packed: the real tokens only',
                "    size = {n: (t.float() * real[n] if n in real else t).abs().max().item() for n, t in logical.items()}",
            ]
            if c.packed
            else [
                "    size = {name: t.abs().max().item() for name, t in logical.items()}  # for atol's floor"
            ]
        ),
        '    sizes = {"dV": size["dO"], "dQ": SCALE * size["dO"] * size["v"] * size["k"],',
        '             "dK": SCALE * size["dO"] * size["v"] * size["q"]}',
        f'    product = logical["dO"].float() * {_value(c, "o")}'
        + (" * rows_q" if c.padded else "")
        + "  # the real rows of dO * O as stored",
        "    squares = product.nan_to_num(0.0, 0.0, 0.0).square().sum(-1)  # dQ reads one row's D",
        "    per_key = squares.reshape(B, H_KV, -1).sum(-1)  # dK: every row of its group's query heads",
        '    stored = {"dQ": STORED_O * SCALE * squares.max().sqrt().item() * size["k"],',
        '              "dK": STORED_O * SCALE * per_key.max().sqrt().item() * size["q"]}',
    ]
    for name, rows in (("dQ", rows_q), ("dK", rows_kv), ("dV", rows_kv)):
        tail = f", {rows})" if c.padded else ")"
        lines.append(
            f'    checks["{name}"] = check({_value(c, name)}, grads["{name}"], '
            f'grad_atol(grads["{name}"], sizes["{name}"], stored.get("{name}", 0.0)), GRAD_RTOL{tail}'
        )
    if c.sink:
        lines.append(
            '    checks["dSink"] = check(data["dSink_token"], grads["dSink"], grad_atol(grads["dSink"], 1.0), GRAD_RTOL)'
        )
    lines += [
        f"    first = {{name: data[name].float() for name in {name_tuple(grads)}}}",
        f"    run_once(run, data, {name_tuple(grads)})  # once more: the same bits?",
        f'    figures["repeatable"] = all(torch.equal(first[n], data[n].float()) for n in {name_tuple(grads)})',
        '    figures["backward_kernel_us"] = kernel_us(run, handle)',
    ]
    return lines
