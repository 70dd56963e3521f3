"""The reproduction script: one standalone Python file that reproduces a configuration with cudnn
and torch only, made of the engine's own code.

A script is the engine's functions, classes and constants that its run needs, copied verbatim
module by module (bundle.py finds and writes them), then short glue that runs them: it makes the
configuration, builds each pass's graph with the engine's define(), draws the engine's inputs,
checks them against the engine's fp32 reference and times them with the engine's kernel_time().
There is no second copy of that logic to drift away from the engine. The glue is this module's
functions below, copied as written, and the passes' flow, written for the configuration so that
it says only what the configuration does; no glue function is over GLUE_MAX_LINES lines.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import textwrap
from typing import Any

from ..engine.graph import define, heuristic_modes
from ..engine.measure import poison
from ..engine.tensors import dump_dropout_mask, workspace
from ..engine.timing import kernel_time
from ..engine.tolerances import compare, tolerance
from ..model.config import SdpaConfig
from ..model.options import TimingOptions
from ..model.pins import append_plan
from .bundle import PAGE, BundleError, bundle

GLUE_MAX_LINES = 15
# Every name the glue defines in a script; anything else in it is the engine's, verbatim.
GLUE = (
    "CONFIG",
    "SEED",
    "GRADIENTS",
    "fp8",
    "storage",
    "open_handle",
    "build_plan",
    "build_pinned_plan",
    "executor",
    "run_once",
    "checked",
    "repeatable",
    "kernel_us",
    "drawn_dropout_mask",
    "forward_pass",
    "check_forward",
    "backward_pass",
    "check_backward",
    "report",
    "report_backward",
    "main",
)


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cudnn-sdpa-explorer")
    except PackageNotFoundError:
        return "unknown"


def script(config: SdpaConfig, seed: int = 0, finding: str = "") -> str:
    """A standalone Python file that reproduces `config` with cudnn and torch only: the forward
    (and with `config.backward` the training step's backward), each built, checked against the
    fp32 reference and timed by the engine's own code; its last line is `RESULT {json}`.
    `finding` says what it reproduces (a crash, for an upstream report)."""
    stored = config.fp8 or config.paged or config.packed  # read back through storage.logical
    left_out = frozenset() if stored else frozenset({"fp8"})
    code = bundle(_glue(config, seed), GLUE, __name__, GLUE_MAX_LINES, left_out)
    return _docstring(config, finding) + "\n" + code


# ---- the glue a script copies from here (what its main() reaches) -------------------------------


def open_handle():
    """A cuDNN handle on torch's current stream, as the engine makes it."""
    import cudnn
    import torch

    torch.cuda.init()
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    return handle


def build_plan(g):
    """The frontend's phases in the engine's order. execute() then runs the plan build_plans()
    chose, the engine's heuristic pick; returns the workspace that plan needs."""
    import cudnn
    import torch

    g.graph.validate()
    g.graph.build_operation_graph()
    g.graph.create_execution_plans(heuristic_modes(cudnn, g.config.heuristics))
    g.graph.check_support()
    g.graph.build_plans()
    g.workspace_bytes = g.graph.get_workspace_size()
    return workspace(torch, g)


def build_pinned_plan(g):
    """The heuristic's phases, then the pinned plan (CONFIG.plan) made with create_execution_plan
    and built, so execute() runs it (the label printed names it); exits where this cuDNN lacks it."""
    import cudnn
    import torch

    build_plan(g)
    try:
        g.graph.build_plan_at_index(append_plan(g.graph, cudnn, g.config.plan))  # selects it for execute()
    except Exception as exc:
        raise SystemExit(
            f"pinned plan {g.config.plan} is not in cuDNN {cudnn.backend_version()}: {exc}"
        ) from exc
    g.workspace_bytes = g.graph.get_workspace_size()  # the pinned plan's
    return workspace(torch, g)


def executor(g, data, ws, handle):
    """One execute() of the chosen plan on these tensors, as a user's code calls it."""
    pack = g.variant_pack(data)
    return lambda: g.graph.execute(pack, ws, handle=handle)


def run_once(run, data, names):
    """One execution, its outputs `names` NaN before it: an element it never writes cannot pass."""
    import torch

    for name in names:
        poison(data[name])
    run()
    torch.cuda.synchronize()


def checked(config, got, ref, rows, grad=False, floor=0.0):
    """One output against its fp32 reference within the engine's tolerance: (atol, its error)."""
    atol, rtol = tolerance(config, ref, grad, floor)
    return atol, compare(got, ref, atol, rtol, rows)


def repeatable(run, data, names):
    """Whether two more executions write the same values (a deterministic algorithm must)."""
    import torch

    run_once(run, data, names)
    first = {name: data[name].clone() for name in names}
    run_once(run, data, names)
    return all(torch.equal(first[name].float(), data[name].float()) for name in names)


def kernel_us(run, handle):
    """Median kernel time of one execution: CUPTI kernel durations over CUDA-graph replays."""
    import cudnn

    return kernel_time(run, lambda ptr: cudnn.set_stream(handle, ptr), TimingOptions()).median_us


def drawn_dropout_mask(config, data, handle):
    """The dropout mask cuDNN draws: the forward defined again with rng_dump writes it (the timed
    graph does not dump: writing the mask would slow it)."""
    check = define(config, handle, rng_dump=True)
    return dump_dropout_mask(check, data, build_plan(check), handle)


_COPIED_GLUE = (
    open_handle,
    build_plan,
    build_pinned_plan,
    executor,
    run_once,
    checked,
    repeatable,
    kernel_us,
    drawn_dropout_mask,
)


# ---- the glue written for one configuration ------------------------------------------------------


def _glue(c: SdpaConfig, seed: int) -> list[str]:
    """The script's last section: this configuration, the glue copied from here (the bundle keeps
    what main() reaches), and the passes' flow, which says only what this configuration does."""
    constants = [
        f"CONFIG = {_config_literal(c)}",
        f"SEED = {seed}  # the seed of the inputs, drawn as the engine draws them",
    ]
    if c.backward:
        constants.append(
            'GRADIENTS = {"dQ": 0, "dK": 1, "dV": 1}  # each, and whose real lengths its rows follow: q (0), k and v (1)'
        )
    copied = [inspect.getsource(fn) for fn in _COPIED_GLUE]
    return ["\n".join(constants) + "\n", *copied, *_forward_glue(c), *_backward_glue(c), _main(c)]


def _numbers(c: SdpaConfig) -> str:
    """How the glue reads a tensor as the logical numbers it stands for (FP8: by its scale; pages
    gathered through the page table; packed tokens unpacked)."""
    return "logical(CONFIG, data, name)" if c.fp8 or c.paged or c.packed else "data[name]"


def _forward_glue(c: SdpaConfig) -> list[str]:
    o8 = c.fp8 and c.o_dtype == "fp8_e4m3"
    run = _function(
        "forward_pass(handle)",
        "The forward: its graph and the plan the heuristic picks, its tensors drawn as the engine "
        "draws them, then checked and timed.",
        "g = define(CONFIG, handle)",
        "ws = build_pinned_plan(g)" if c.plan else "ws = build_plan(g)",
        'data = device_tensors(CONFIG, "cuda", SEED)',
        "run = executor(g, data, ws, handle)",
        "fp8.delayed_scaling(run, data, fp8.FORWARD_DELAYED)  # O's scale: 448 / the amax of a warm-up"
        if o8
        else None,
        "mask = drawn_dropout_mask(CONFIG, data, handle)" if c.dropout else "mask = None  # no dropout",
        "figures = check_forward(data, run, mask)",
        'figures["kernel_us"] = kernel_us(run, handle)',
        "return figures, data, mask" if c.backward else "return figures",
    )
    check = _function(
        "check_forward(data, run, mask)",
        "O against the fp32 reference on the same logical q, k, v, as the numbers the graph "
        "computed with; padded rows are not compared.",
        'run_once(run, data, ["o"])',
        f'q, k, v, o = ({_numbers(c)} for name in ("q", "k", "v", "o"))',
        'ref = reference_fp32(CONFIG, q, k, v, data.get("bias"), mask, sink=data.get("sink_token"))'
        if c.sink
        else 'ref = reference_fp32(CONFIG, q, k, v, data.get("bias"), mask)',
        'atol, error = checked(CONFIG, o, ref, valid_rows(CONFIG, o.device), floor=atol_floor(CONFIG, "O", q, k, v))',
        'figures = {"output_passed": error.passed, "max_abs_error": error.max_abs, "atol": atol}',
        'figures.update(amax_o=data["amax_o"].item(), reference_max_abs=float(ref.abs().max()))'
        if c.fp8
        else None,
        'figures["scale_o"] = data["scale_o"].item()' if c.fp8 else None,
        "return figures",
    )
    report = _function(
        "report(figures)",
        "What was measured, in words.",
        "import cudnn",
        "import torch",
        "",
        "print(CONFIG.label())",
        'print(f"cuDNN {cudnn.backend_version()}, frontend {cudnn.__version__}, torch {torch.__version__}, "',
        '      f"{torch.cuda.get_device_name()}")',
        'verdict = "PASS" if figures["output_passed"] else "FAIL"',
        "print(f\"max abs error {figures['max_abs_error']:.3e} against fp32 (atol {figures['atol']:.3g}): {verdict}\")",
        "print(f\"FP8: amax_o {figures['amax_o']:.4g} (reference max |o| {figures['reference_max_abs']:.4g}), \"\n"
        "      f\"scale_o {figures['scale_o']:.4g}\")"
        if c.fp8
        else None,
        'us = figures["kernel_us"]',
        'print(f"kernel time {us:.2f} us, {tflops(CONFIG.flops(), us):.1f} TFLOPS")',
    )
    return [run, check, report]


def _backward_glue(c: SdpaConfig) -> list[str]:
    if not c.backward:
        return []
    run = _function(
        "backward_pass(handle, forward_data, mask)",
        "The backward on the forward's tensors and a seeded dO: built, checked, run twice more "
        "(the same bits?) and timed.",
        "g = define(CONFIG, handle, backward=True)",
        "ws = build_plan(g)",
        'data = backward_tensors(CONFIG, forward_data, "cuda", SEED)',
        "run = executor(g, data, ws, handle)",
        "fp8.delayed_scaling(run, data, fp8.BACKWARD_DELAYED)  # dQ, dK, dV, dP: 448 / a warm-up's amax"
        if c.fp8
        else None,
        "figures = check_backward(data, run, mask)",
        'figures["bitwise_repeatable"] = repeatable(run, data, GRADIENTS)',
        'figures["deterministic"] = CONFIG.deterministic',
        'figures["backward_kernel_us"] = kernel_us(run, handle)',
        "return figures",
    )
    check = _function(
        "check_backward(data, run, mask)",
        "dQ, dK, dV against fp32 autograd of the reference for the same dO; padded rows are not compared.",
        "run_once(run, data, GRADIENTS)",
        f'q, k, v, d_o = ({_numbers(c)} for name in ("q", "k", "v", "dO"))',
        'refs = reference_grads(CONFIG, q, k, v, d_o, data.get("bias"), mask, sink=data.get("sink_token"))'
        if c.sink
        else 'refs = reference_grads(CONFIG, q, k, v, d_o, data.get("bias"), mask)',
        'figures = {"grad_max_abs_error": {}, "grad_atol": {}, "grad_passed": True}',
        "for (name, side), ref in zip(GRADIENTS.items(), refs):",
        "    floor = atol_floor(CONFIG, name, q, k, v, d_o)  # atol's least, from the inputs' size",
        f"    atol, error = checked(CONFIG, {_numbers(c)}, ref, valid_rows(CONFIG, ref.device, side), True, floor)",
        '    figures["grad_max_abs_error"][name], figures["grad_atol"][name] = error.max_abs, atol',
        '    figures["grad_passed"] = figures["grad_passed"] and error.passed',
        'figures["grad_reference_max_abs"] = {name: float(ref.abs().max()) for name, ref in zip(GRADIENTS, refs)}'
        if c.fp8
        else None,
        'figures["grad_amax"] = {name: data[f"amax_{name.lower()}"].item() for name in ("dQ", "dK", "dV", "dP")}'
        if c.fp8
        else None,
        "return figures",
    )
    asked = " (the deterministic algorithm was asked for)" if c.deterministic else ""
    report = _function(
        "report_backward(figures)",
        "The backward's figures in words.",
        "for name in GRADIENTS:",
        '    error, atol = figures["grad_max_abs_error"][name], figures["grad_atol"][name]',
        '    print(f"{name} max abs error {error:.3e} against fp32 autograd (atol {atol:.3g})")',
        'verdict = "PASS" if figures["grad_passed"] else "FAIL"',
        f"print(f\"gradients: {{verdict}}; bitwise repeatable: {{figures['bitwise_repeatable']}}{asked}\")",
        'print("FP8 gradient amax: " + ", ".join(f"{n} {a:.4g}" for n, a in figures["grad_amax"].items()))'
        if c.fp8
        else None,
        'us = figures["backward_kernel_us"]',
        'print(f"backward kernel time {us:.2f} us, {tflops(CONFIG.backward_flops(), us):.1f} TFLOPS; "',
        "      f\"training step {figures['step_us']:.2f} us\")",
    )
    return [run, check, report]


def _main(c: SdpaConfig) -> str:
    training = [
        "figures.update(backward_pass(handle, data, mask))",
        'figures["step_us"] = figures["kernel_us"] + figures["backward_kernel_us"]',
        'repeat_ok = figures["bitwise_repeatable"] or not CONFIG.deterministic',
        'figures["passed"] = figures["output_passed"] and figures["grad_passed"] and repeat_ok',
    ]
    main = _function(
        "main()",
        "The forward, then the backward on what it wrote, each checked and timed; RESULT last."
        if c.backward
        else "The forward, checked and timed; RESULT last.",
        "handle = open_handle()",
        "figures, data, mask = forward_pass(handle)" if c.backward else "figures = forward_pass(handle)",
        *(training if c.backward else ['figures["passed"] = figures["output_passed"]']),
        "report(figures)",
        "report_backward(figures)" if c.backward else None,
        'print("RESULT " + json.dumps(figures))',
        'sys.exit(0 if figures["passed"] else 1)',
    )
    return main + '\n\nif __name__ == "__main__":\n    main()\n'


def _function(signature: str, doc: str, *body: str | None) -> str:
    """A glue function's source: its docstring wrapped to the page, then the lines of `body` this
    configuration needs (None: one it does not), one indent in."""
    wrapped = textwrap.wrap(f'"""{doc}"""', PAGE - 4)
    lines = [f"def {signature}:", *(f"    {line}" for line in wrapped)]
    lines += [textwrap.indent(line, "    ") if line else "" for line in body if line is not None]
    text = "\n".join(lines) + "\n"
    if text.count("\n") > GLUE_MAX_LINES:
        raise BundleError(f"glue {signature} has {text.count(chr(10))} lines, more than {GLUE_MAX_LINES}")
    return text


def _config_literal(config: SdpaConfig) -> str:
    """`SdpaConfig(...)` with the fields that differ from their defaults, one a line when long."""
    args = [
        f"{f.name}={_literal(getattr(config, f.name))}"
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != _default(f)
    ]
    one_line = f"SdpaConfig({', '.join(args)})"
    if len(one_line) <= PAGE - len("CONFIG = "):
        return one_line
    return "SdpaConfig(\n" + "".join(f"    {a},\n" for a in args) + ")"


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        items = [_literal(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    return repr(value)


# ---- the docstring ---------------------------------------------------------------------------------


def _docstring(config: SdpaConfig, finding: str = "") -> str:
    """What the script does for this configuration, and how it is made."""
    c = config
    paragraphs = [f"What it reproduces: {finding}"] if finding else []
    paragraphs += [
        f"Exported by sdpa-explorer {tool_version()}. Needs only the cuDNN frontend "
        "(nvidia-cudnn-frontend) and torch with a CUDA GPU. main(), at the end, builds the graph "
        "with the layout's strides, runs it, checks it against fp32 math on the same logical "
        "(b, h, s, d) tensors (layout is only strides: nothing is permuted), and prints the kernel "
        "time: CUPTI kernel durations while a CUDA graph of N executions is replayed.",
    ]
    if c.fp8:
        outputs = (["O"] if c.o_dtype == "fp8_e4m3" else []) + (["dQ, dK, dV, dP"] if c.backward else [])
        text = (
            f"FP8 (E4M3): q, k, v{', dO' if c.backward else ''} are scaled per tensor by 448/amax before "
            "rounding, and the graph reads their descales. "
        )
        if outputs:
            text += f"{', '.join(outputs)} get delayed scaling: one execution with scale 1, then 448/amax of what it wrote. "
        paragraphs.append(text + "The reference computes on the dequantised inputs.")
    if c.backward:
        op = "sdpa_fp8_backward" if c.fp8 else "sdpa_backward"
        paragraphs.append(
            f"Training step: the forward also writes the softmax stats; the backward ({op}) turns o, "
            "the stats and a random output gradient dO into dQ, dK, dV, checked against fp32 autograd "
            "on the same logical tensors and the same dO, and timed the same way."
            + (" It asks for the deterministic algorithm." if c.deterministic else "")
        )
    if c.dropout:
        paragraphs.append(
            "Dropout: the forward defined again with rng_dump writes the mask cuDNN draws, and the "
            "reference applies that mask."
        )
    paragraphs.append(
        "Everything above the last section is sdpa-explorer's own engine, copied verbatim module by "
        "module, and only what this configuration runs; the engine's branches for options it does "
        "not have stay in those functions but are not taken. The last section is this configuration "
        "and the glue that runs it. Exit code 0 when the output"
        + (" and the gradients are" if c.backward else " is")
        + " within tolerance; the last line is RESULT {json}."
    )
    body = "\n\n".join(textwrap.fill(p, PAGE) for p in paragraphs)
    return f'#!/usr/bin/env python3\n"""Reproduce one cuDNN SDPA configuration: {c.label()}\n\n{body}\n"""\n'
