"""The reproduction script's score modifier (model/variants.py), written out for one variant: the
`ScoreMod` class whose calls build the engine's score_mod sub-graph (engine/score_mod.py) op for
op, only the operations this variant uses, and whose repr is the engine's, so the script's graph
JSON is the engine's; and the reference's lines that apply it (engine/modifiers.py)."""

from __future__ import annotations

from ..model.config import SdpaConfig

_SCALAR = "cudnn.scalar_type.RUNTIME_PARAM"
_HELPERS = [
    "    @staticmethod",
    "    def typed(t, dtype):",
    "        t.set_data_type(dtype)",
    "        return t",
    "",
    "    def keep(self, graph, score):",
    '        """True where query i keeps key j (the variant\'s mask)."""',
    "        i32, boolean = cudnn.data_type.INT32, cudnn.data_type.BOOLEAN",
    "        row, col = (self.typed(graph.gen_index(input=score, axis=a, compute_data_type=i32), i32) for a in (2, 3))",
    "        kept = self.typed(graph.cmp_ge(input=row, comparison=col, compute_data_type=boolean), boolean)",
]


def _keep_lines(c: SdpaConfig) -> list[str]:
    v = c.modifier
    lines = list(_HELPERS)
    if v.window:
        lines += [
            "        back = self.typed(graph.sub(a=row, b=col, compute_data_type=i32), i32)",
            f"        near = graph.cmp_lt(input=back, comparison=self.typed(graph.tensor_scalar({v.window}, {_SCALAR}), i32),"
            " compute_data_type=boolean)",
            "        kept = self.typed(graph.logical_and(a=kept, b=self.typed(near, boolean), compute_data_type=boolean),"
            " boolean)",
        ]
    if v.prefix is not None:
        lines += [
            f"        head = graph.cmp_lt(input=col, comparison=self.typed(graph.tensor_scalar({v.prefix}, {_SCALAR}), i32),"
            " compute_data_type=boolean)",
            "        kept = self.typed(graph.logical_or(a=kept, b=self.typed(head, boolean), compute_data_type=boolean),"
            " boolean)",
        ]
    if len(v.documents) > 1:
        lines += [
            "        docs = []",
            "        for index in (row, col):  # each position's document: the starts after the first it reached",
            "            doc = None",
            f"            for start in {list(v.starts[1:])}:",
            f"                at = graph.cmp_ge(input=index, comparison=self.typed(graph.tensor_scalar(start, {_SCALAR}), i32),"
            " compute_data_type=boolean)",
            "                at = self.typed(at, i32)",
            "                doc = at if doc is None else self.typed(graph.add(a=doc, b=at, compute_data_type=i32), i32)",
            "            docs.append(doc)",
            "        same = self.typed(graph.cmp_eq(input=docs[0], comparison=docs[1], compute_data_type=boolean), boolean)",
            "        kept = self.typed(graph.logical_and(a=kept, b=same, compute_data_type=boolean), boolean)",
        ]
    return [*lines, "        return kept"]


def score_mod_class(c: SdpaConfig) -> list[str]:
    """`ScoreMod`: the score_mod (and, as `.bprop`, score_mod_bprop) of the configuration's variant."""
    v = c.modifier
    if v.name == "none":
        return []
    lines = [
        "class ScoreMod:",
        f'    """cuDNN\'s score_mod of the variant {v.text} ({v.words()}): called with the graph and',
        '    the scaled scores when the graph is lowered; `bprop` takes the scores\' gradient back through it."""',
        "",
        "    def __init__(self, text):",
        "        self.text, self.before_tanh, self.bprop = text, None, Bprop(self)",
        "",
        "    def __repr__(self):",
        "        return f'ScoreMod(\"{self.text}\")'",
        "",
        "    def __call__(self, graph, score):",
    ]
    if v.cap is not None:
        lines += [
            f"        cap = graph.tensor_scalar({v.cap_fp32!r}, {_SCALAR})  # cap {v.text}: as an fp32 (cuDNN 9.19",
            "        # makes every output non-finite from a scalar that is not exactly an fp32)",
            "        self.before_tanh = graph.div(a=score, b=cap)",
            "        score = graph.mul(a=graph.tanh(input=self.before_tanh), b=cap)",
        ]
    if v.masks:
        lines.append(
            f'        inf = graph.tensor_scalar(float("-inf"), {_SCALAR})  # cuDNN 9.10 and later mask with -inf'
        )
        lines.append(
            "        score = graph.binary_select(input0=score, input1=inf, mask=self.keep(graph, score))"
        )
    lines.append("        return score")
    if v.masks:
        lines += ["", *_keep_lines(c)]
    lines += [
        "",
        "",
        "class Bprop:",
        '    """score_mod_bprop: the gradient of the modified scores to that of the scores."""',
        "",
        "    def __init__(self, forward):",
        "        self.forward = forward",
        "",
        "    def __repr__(self):",
        '        return f"{self.forward!r}.bprop"',
        "",
        "    def __call__(self, graph, grad):",
    ]
    if v.masks:
        lines += [
            f"        zero = graph.tensor_scalar(0.0, {_SCALAR})",
            "        grad = graph.binary_select(input0=grad, input1=zero, mask=self.forward.keep(graph, grad))",
        ]
    if v.cap is not None:
        lines += [
            f"        cap = graph.tensor_scalar({v.cap_fp32!r}, {_SCALAR})",
            "        scaled = graph.mul(a=grad, b=cap)",
            "        grad = graph.div(a=graph.tanh_backward(loss=scaled, input=self.forward.before_tanh), b=cap)",
        ]
    return [*lines, "        return grad"]


def reference_lines(c: SdpaConfig) -> tuple[list[str], str | None]:
    """The reference's lines for the variant: its softcap of the scaled scores, and its mask as one
    boolean of i (queries) and j (keys), or None where it masks nothing."""
    v = c.modifier
    cap = (
        [f"    scores = {float(v.cap)!r} * torch.tanh(scores / {float(v.cap)!r})  # {v.text}"]
        if v.cap
        else []
    )
    if not v.masks:
        return cap, None
    keep = "(j <= i)"  # each alternative whole in its parentheses, as the reference joins them
    if v.window:
        keep = f"((j <= i) & (j > i - {v.window}))"
    if v.prefix is not None:
        keep = f"((j <= i) | (j < {v.prefix}))"
    if len(v.documents) > 1:
        keep = "((j <= i) & (DOCS.to(i.device)[i] == DOCS.to(i.device)[j]))"
    return cap, keep


def reference_constants(c: SdpaConfig) -> list[str]:
    """The document number of each position, where the variant packs documents."""
    v = c.modifier
    if len(v.documents) < 2:
        return []
    return [
        f"DOCS = torch.repeat_interleave(torch.arange({len(v.documents)}), torch.tensor({list(v.documents)}))"
        "  # each position's document"
    ]
