"""The reproduction script's reference, written out for one configuration's masks: fp32
attention one sequence (and, where its scores would be large, a few heads) at a time, in the
engine's order of operations (engine/reference.py), so the script's numbers are the engine's."""

from __future__ import annotations

from ..engine.reference import chunk_steps
from ..model.config import SdpaConfig
from .repro_variant import reference_lines


def _scores(c: SdpaConfig) -> list[str]:
    """The lines of one block's scores: q k^T * SCALE, the bias and ALiBi, the masks, the sink."""
    lines = [
        "    scores = (qb.reshape(len(kb), -1, D_QK) @ kb.transpose(-1, -2)).view(len(qb), S_Q, -1) * SCALE"
    ]
    if c.h_q == c.h_kv:
        lines = ["    scores = qb @ kb.transpose(-1, -2) * SCALE"]
    terms = []
    if c.bias != "none":
        heads = "heads" if c.bias.endswith("h") else "0:1"
        terms.append(f"bias[{heads}, :, :lkv].float()")
    if c.alibi:
        terms.append("(j - i) * torch.tensor(SLOPES[heads], device=DEVICE).view(-1, 1, 1)")
    capped, inside = reference_lines(c)  # a score modifier: its cap first, as cuDNN's score_mod
    lines += capped
    if terms:
        lines.append(
            f"    scores = scores + ({' + '.join(terms)})"
            if len(terms) > 1
            else f"    scores = scores + {terms[0]}"
        )
    keep = ["(i < lq)"] if c.padded else []
    align = ("lkv - lq" if c.padded else "S_KV - S_Q") if c.causal == "bottom_right" else "0"
    if c.causal != "none":
        keep.append(f"(j <= i + {align})" if align != "0" else "(j <= i)")
    if c.window:
        keep.append(f"(j > i + {align} - WINDOW)" if align != "0" else "(j > i - WINDOW)")
    if inside:  # its mask alone: cuDNN takes a score_mod beside no other
        keep.append(inside)
    if keep:
        kept = " & ".join(keep) if len(keep) > 1 else keep[0][1:-1]
        lines.append(f'    scores = scores.masked_fill(~({kept}), float("-inf"))')
    if c.sink:
        lines.append(
            "    scores = torch.cat([scores, sink.view(-1)[heads].view(-1, 1, 1).expand(-1, S_Q, 1)], -1)"
        )
    return lines


def _extra(c: SdpaConfig) -> list[str]:
    """The reference's inputs past q, k, v: the bias, the sinks, the dropout mask."""
    return [n for n, used in (("bias", c.bias != "none"), ("sink", c.sink), ("mask", c.dropout)) if used]


def _masks(c: SdpaConfig) -> str:
    """What the scores take past q k^T, as attend()'s docstring names them."""
    return ", ".join(
        w
        for w, on in (
            ("causal " + c.causal.replace("_", "-"), c.causal != "none"),
            ("sliding window", c.window),
            ("real lengths", c.padded),
            ("bias", c.bias != "none"),
            ("ALiBi", c.alibi),
            ("sinks", c.sink),
            (f"score modifier {c.variant}", c.variant != "none"),
            ("dropout", c.dropout),
        )
        if on  # fmt: skip
    )


def reference(c: SdpaConfig) -> list[str]:
    """`attend(b, heads, q, k, v, ...)`, a block's fp32 attention, and `reference(...)` over them."""
    extra = _extra(c)
    lines = _attend(c, extra) + _loop(c, extra)
    return _all_heads(lines) if heads_step(c) == c.h_q else lines


def _attend(c: SdpaConfig, extra: list[str]) -> list[str]:
    """`attend(...)`: one block's inputs sliced, its scores, softmax and output."""
    masks = _masks(c)
    lines = [
        f"def attend({', '.join(['b', 'heads', 'q', 'k', 'v', *extra])}):",
        '    """softmax(q k^T * SCALE'
        + (" + terms" if masks else "")
        + ") v of sequence b's `heads` in fp32"
        + (f" ({masks})" if masks else "")
        + ', and the rows\' max and sum of exponents."""',
    ]
    if c.padded:
        lines.append("    lq, lkv = LENS_Q[b], LENS_KV[b]")
    if c.h_q != c.h_kv:  # GQA: the query heads of one key/value head as one matrix, never copied
        lines.append("    kv = slice(heads.start // (H_Q // H_KV), (heads.stop - 1) // (H_Q // H_KV) + 1)")
    kv = "kv" if c.h_q != c.h_kv else "heads"
    lines.append(f"    qb, kb, vb = q[heads].float(), k[{kv}, :lkv].float(), v[{kv}, :lkv].float()")
    if c.causal != "none" or c.window or c.alibi or c.padded or c.modifier.masks:
        kind = ", dtype=torch.float32" if c.alibi else ""
        lines.append(
            f"    i, j = torch.arange(S_Q, device=DEVICE{kind}).view(-1, 1), torch.arange(lkv, device=DEVICE{kind})"
        )
    lines += _scores(c)
    lines += [
        "    top = scores.amax(-1, keepdim=True)",
        "    empty = ~torch.isfinite(top)  # a row with no key gives 0",
        "    p = torch.softmax(scores.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0)",
    ]
    if c.sink:
        lines.append("    p = p[..., :-1]  # the sink's column adds nothing to the output")
    if c.dropout:
        lines.append("    p = p * mask[heads, :, :lkv] / (1.0 - DROPOUT)")
    o = "(p.reshape(len(vb), -1, p.shape[-1]) @ vb).view(len(qb), S_Q, D_V)" if c.h_q != c.h_kv else "p @ vb"
    lines.append(f"    return {o}, top, (scores - top).exp().sum(-1, keepdim=True)")
    return lines if c.padded else [_whole(line) for line in lines]  # unpadded: every sequence is whole


def _loop(c: SdpaConfig, extra: list[str]) -> list[str]:
    """`reference(...)`: attend() over the sequences and blocks of heads, its outputs by name."""
    outputs = {"none": '{"O": o}', "stats": '{"O": o, "Stats": top + total.log()}',
               "max_sum_exp": '{"O": o, "Max": top, "SumExp": total}'}[c.softmax_out]  # fmt: skip
    return [
        "",
        f"def reference(q, k, v{''.join(', ' + n for n in extra)}):",
        '    """Every output the tool checks, by name: fp32, HEADS heads of one sequence at a time."""',
        "    o, top, total = (torch.zeros((B, H_Q, S_Q, d), device=DEVICE) for d in (D_V, 1, 1))",
        "    with torch.no_grad():",
        "        for b in range(B):",
        "            for h in range(0, H_Q, HEADS):",
        "                at = b, slice(h, h + HEADS)",
        f"                o[at], top[at], total[at] = attend({', '.join(['b', 'at[1]', 'q[b]', 'k[b]', 'v[b]', *(_per_b(c, n) for n in extra)])})",
        f"    return {outputs}",
    ]


def heads_step(c: SdpaConfig) -> int:
    """The query heads the reference takes at once: the engine's own step on the GPU (whole GQA
    groups, its fp32 scores under its memory budget), so the sums go in the engine's order."""
    return chunk_steps(c, "cuda")[0]


def _whole(line: str) -> str:
    """A line of attend() where every key is real: no `:lkv` slices."""
    return (
        line.replace(", :lkv]", "]").replace(":lkv]", ":]").replace("torch.arange(lkv,", "torch.arange(S_KV,")
    )


def _all_heads(lines: list[str]) -> list[str]:
    """The reference's loop where one step takes every head: over the sequences only."""
    out = []
    for line in lines:
        if line.strip().startswith("for h in range(0, H_Q, HEADS)") or line.strip().startswith(
            "at = b, slice"
        ):
            continue
        if "at[1]" in line or "[at]" in line:
            line = line.replace("at[1]", "slice(0, H_Q)").replace("[at]", "[b]")[4:]
        out.append(line)
    return [line.replace("HEADS heads of one sequence", "one sequence") for line in out]


def _per_b(c: SdpaConfig, name: str, sink: str = "sink") -> str:
    """What attend() is given of an extra input for sequence b."""
    return {"bias": "bias[b]" if c.bias.startswith("b") else "bias[0]", "sink": sink, "mask": "mask[b]"}[name]


def reference_grads(c: SdpaConfig) -> list[str]:
    extra = _extra(c)
    leaves = "[t[b].float().requires_grad_() for t in (q, k, v)]"
    if c.sink:
        leaves = f"{leaves} + [sink.float().detach().requires_grad_()]"
    call_args = ", ".join(["b", "at[1]", "*leaves[:3]", *(_per_b(c, n, "leaves[3]") for n in extra)])
    lines = [
        f"def reference_grads(q, k, v, d_o{''.join(', ' + n for n in extra)}):",
        '    """dQ, dK, dV'
        + (", dSink" if c.sink else "")
        + " of the reference for dO: fp32 autograd, HEADS "
        'heads of one sequence at a time."""',
        '    out = {n: torch.zeros(t.shape, device=DEVICE) for n, t in (("dQ", q), ("dK", k), ("dV", v))}',
    ]
    if c.sink:
        lines.append('    out["dSink"] = torch.zeros((1, H_Q, 1, 1), device=DEVICE)')
    lines += [
        "    for b in range(B):",
        "        for h in range(0, H_Q, HEADS):",
        "            at = b, slice(h, h + HEADS)",
        f"            leaves = {leaves}",
        f"            o = attend({call_args})[0]",
        "            grads = torch.autograd.grad((o * d_o[at].float()).sum(), leaves)",
        '            out["dQ"][at] += grads[0][at[1]]',
        '            out["dK"][b] += grads[1]',
        '            out["dV"][b] += grads[2]',
    ]
    if c.sink:
        lines.append('            out["dSink"] += grads[3].view(1, H_Q, 1, 1)')
    return [*lines, "    return out"]
