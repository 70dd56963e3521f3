"""Each score modifier (model/variants.py) as cuDNN's `score_mod` sub-graph, and its backward.

The frontend's `sdpa` calls a score_mod callback with a graph and the scaled scores (q k^T times
the attention scale) when it lowers the graph to cuDNN, and puts what it returns into the softmax;
`sdpa_backward` calls it again to recompute the scores, and calls `score_mod_bprop` with the
gradient of the modified scores for the gradient of the scores. The sub-graph is pointwise
operations: tanh for a softcap (its backward tanh_backward, as the frontend's own Softcap helper
writes it), index generation, comparisons and a select for a mask. The constants are scalars of
the sub-graph (pass-by-value: no tensor of the variant pack).

The callbacks are objects whose repr is the Python that makes them (`ScoreMod("softcap:50")`), so
the graph's JSON says which modifier it holds, the same in every process (a plan cache key could
not hold a function's address; the frontend's plan serializer refuses callbacks anyway), and the
reproduction script writes the same object.
"""

from __future__ import annotations

from typing import Any

from ..model.variants import Variant, parse_variant


def _types() -> tuple[Any, Any, Any, Any]:
    """(INT32, BOOLEAN, the runtime-parameter scalar kind, -inf as cuDNN masks with it)."""
    import cudnn

    try:  # before 9.10 cuDNN preferred the lowest float to -inf (the frontend's own rule)
        neg_inf = float("-inf") if cudnn.backend_version() >= 91000 else -3.4028234663852886e38
    except Exception:
        neg_inf = float("-inf")
    return cudnn.data_type.INT32, cudnn.data_type.BOOLEAN, cudnn.scalar_type.RUNTIME_PARAM, neg_inf


def _cap(graph: Any, v: Variant) -> Any:
    """The cap as a runtime-parameter scalar of its fp32 (Variant.cap_fp32 says why; measured by
    benchmarks/whose_probe.py)."""
    return graph.tensor_scalar(v.cap_fp32, _types()[2])


def _index(graph: Any, score: Any, axis: int) -> Any:
    int32 = _types()[0]
    t = graph.gen_index(input=score, axis=axis, compute_data_type=int32)
    t.set_data_type(int32)
    return t


def _compare(graph: Any, op: str, a: Any, b: Any, out: Any = None) -> Any:
    """a OP b, as BOOLEAN (or `out`: INT32 0 and 1, to be added)."""
    _int32, boolean, _kind, _inf = _types()
    t = getattr(graph, op)(input=a, comparison=b, compute_data_type=boolean)
    t.set_data_type(out or boolean)
    return t


def _logical(graph: Any, op: str, a: Any, b: Any) -> Any:
    boolean = _types()[1]
    t = getattr(graph, op)(a=a, b=b, compute_data_type=boolean)
    t.set_data_type(boolean)
    return t


def _whole(graph: Any, n: int) -> Any:
    """An INT32 scalar: cuDNN's fused kernels compare INT32 indices with INT32 operands only."""
    int32, _boolean, kind, _inf = _types()
    t = graph.tensor_scalar(int(n), kind)
    t.set_data_type(int32)
    return t


def _document(graph: Any, index: Any, v: Variant) -> Any:
    """Each position's document number: how many document starts after the first it has reached."""
    int32 = _types()[0]
    doc = None
    for start in v.starts[1:]:
        reached = _compare(graph, "cmp_ge", index, _whole(graph, start), int32)
        if doc is not None:
            reached = graph.add(a=doc, b=reached, compute_data_type=int32)
            reached.set_data_type(int32)
        doc = reached
    return doc


def keep(graph: Any, score: Any, v: Variant) -> Any:
    """BOOLEAN of the scores' shape: True where query i keeps key j (top-left causal: j <= i; a
    window: i - j < W; a prefix: or j < P; documents: and both in the same one)."""
    int32 = _types()[0]
    row, col = _index(graph, score, 2), _index(graph, score, 3)
    kept = _compare(graph, "cmp_ge", row, col)
    if v.window:
        back = graph.sub(a=row, b=col, compute_data_type=int32)
        back.set_data_type(int32)
        kept = _logical(graph, "logical_and", kept, _compare(graph, "cmp_lt", back, _whole(graph, v.window)))
    if v.prefix is not None:
        kept = _logical(graph, "logical_or", kept, _compare(graph, "cmp_lt", col, _whole(graph, v.prefix)))
    if len(v.documents) > 1:
        same = _compare(graph, "cmp_eq", _document(graph, row, v), _document(graph, col, v))
        kept = _logical(graph, "logical_and", kept, same)
    return kept


class ScoreMod:
    """The forward's score_mod of one variant (and the backward's recomputation of the scores):
    the softcap cap * tanh(s / cap), then -inf where the variant masks."""

    def __init__(self, text: str):
        self.variant = parse_variant(text)
        self.before_tanh: Any = None  # the softcap's s / cap, which its backward reads
        self.bprop = Bprop(self)

    def __repr__(self) -> str:
        return f'ScoreMod("{self.variant.text}")'

    def __call__(self, graph: Any, score: Any) -> Any:
        _int32, _boolean, kind, neg_inf = _types()
        v = self.variant
        if v.cap is not None:
            cap = _cap(graph, v)
            self.before_tanh = graph.div(a=score, b=cap)
            score = graph.mul(a=graph.tanh(input=self.before_tanh), b=cap)
        if v.masks:
            score = graph.binary_select(
                input0=score, input1=graph.tensor_scalar(neg_inf, kind), mask=keep(graph, score, v)
            )
        return score


class Bprop:
    """The backward's score_mod_bprop: the gradient of the modified scores to that of the scores
    (zero where masked; the softcap's 1 - tanh^2 through tanh_backward)."""

    def __init__(self, forward: ScoreMod):
        self.forward = forward

    def __repr__(self) -> str:
        return f"{self.forward!r}.bprop"

    def __call__(self, graph: Any, grad: Any) -> Any:
        kind = _types()[2]
        v = self.forward.variant
        if v.masks:
            grad = graph.binary_select(
                input0=grad, input1=graph.tensor_scalar(0.0, kind), mask=keep(graph, grad, v)
            )
        if v.cap is not None:
            cap = _cap(graph, v)
            scaled = graph.mul(a=grad, b=cap)
            grad = graph.div(a=graph.tanh_backward(loss=scaled, input=self.forward.before_tanh), b=cap)
        return grad


def score_mod_keywords(text: str, backward: bool) -> dict[str, Any]:
    """The sdpa (or sdpa_backward) keywords of the variant `text`: none for `none`."""
    mod = ScoreMod(text)
    if mod.variant.name == "none":
        return {}
    return {"score_mod": mod, "score_mod_bprop": mod.bprop} if backward else {"score_mod": mod}
