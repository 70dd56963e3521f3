"""Whose the hunt's last two classes are (docs/BENCHMARKS.md, "Hunting wrong answers"), on the GPU:

- softcap: cuDNN's O is not finite for caps such as 56.7 and 22.2 and right for 50. A plain
  frontend graph (no project code: the frontend's own calls, as its samples write them) runs the
  softcap score_mod for each cap with the cap as a runtime parameter and as a compile-time
  constant, divided by and multiplied by its reciprocal, against torch's fp32 softcap, so whether
  it is the value, the scalar's kind or the division shows;
- the deterministic backward with a sink, not repeatable one run in three at b=4: each output of
  twenty executions of the plan compared bit for bit with the first, so which output it is shows;
- dSink under dropout: cuDNN's dSink is off the reference where dQ, dK and dV are not. Through the
  engine (its graph, tensors and the dropout mask cuDNN drew), dSink = -sum_i P_sink,i D_i with
  D_i = dO_i . O_i is computed in fp64 from O with the dropout (the reference's), from O without
  it, and with O scaled by (1 - p) and 1 / (1 - p), so which one cuDNN computes shows.

    python -m benchmarks.whose_probe [softcap] [det] [dsink]
"""

from __future__ import annotations

import sys

CAPS = (50.0, 30.0, 56.7, 56.75, 22.2, 22.25, 50.5, 64.0, 0.7)


def softcap_o(cap: float, kind: str, form: str, s: int, d: int) -> str:
    """One plain graph's max abs error against torch's fp32 softcap, or its error's words."""
    import cudnn
    import torch

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, s, d, dtype=torch.half, device="cuda") for _ in range(3))
    scale = d**-0.5
    handle = cudnn.create_handle()
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)  # fmt: skip
    scalar_kind = getattr(cudnn.scalar_type, kind)

    def score_mod(g, score):
        if form == "div":
            before = g.div(a=score, b=g.tensor_scalar(cap, scalar_kind))
        else:
            before = g.mul(a=score, b=g.tensor_scalar(1.0 / cap, scalar_kind))
        return g.mul(a=g.tanh(input=before), b=g.tensor_scalar(cap, scalar_kind))

    tq, tk, tv = (graph.tensor_like(x) for x in (q, k, v))
    o_t, _ = graph.sdpa(
        name="sdpa", q=tq, k=tk, v=tv, attn_scale=scale, generate_stats=False, score_mod=score_mod
    )
    o = torch.empty_like(q)
    o_t.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        ws = torch.empty(graph.get_workspace_size(), dtype=torch.uint8, device="cuda")
        graph.execute({tq: q, tk: k, tv: v, o_t: o}, ws, handle=handle)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - a refusal is a finding here, said in its words
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:90]}"
    scores = cap * torch.tanh((q.float() @ k.float().transpose(-1, -2)) * scale / cap)
    ref = torch.softmax(scores, -1) @ v.float()
    bad = int((~torch.isfinite(o)).sum())
    err = (o.float() - ref).abs().nan_to_num(float("inf")).max().item()
    return f"max abs err {err:.3g}" + (f", {bad} of {o.numel()} non-finite" if bad else "")


def softcap() -> None:
    print("## softcap: a plain frontend graph, cap as each scalar kind, divided or multiplied")
    for s, d in ((1, 64), (128, 64)):
        for cap in CAPS:
            for kind in ("RUNTIME_PARAM", "COMPILE_TIME_CONST"):
                for form in ("div", "mul"):
                    print(
                        f"s{s} d{d} cap {cap:g} {kind} {form}: {softcap_o(cap, kind, form, s, d)}", flush=True
                    )


def dsink_case(name: str, config) -> None:
    import torch

    from tui.engine.runner import Engine, RunOptions

    engine = Engine(cache_size=2)
    r = engine.run(config, RunOptions(autotune=False))
    back = r.pass_of("backward")
    print(f"== {name} [{config.label()}]: {r.status}; "
          + ", ".join(f"{c.output} {c.cudnn.max_abs:.3g}{'' if c.passed else ' FAIL'}" for c in back.checks))  # fmt: skip
    m = engine._measurement(config, "backward")
    inputs = m.inputs()
    got = m.outputs_of(m.built.graph.chosen)["dSink"].double().view(-1)
    q, k, v, d_o, o = (x.double() for x in (inputs.q, inputs.k, inputs.v, inputs.d_o, inputs.o))
    sink = inputs.sink.double().view(1, -1, 1, 1)
    group = config.h_q // config.h_kv
    k, v = (x.repeat_interleave(group, 1) for x in (k, v))
    scores = q @ k.transpose(-1, -2) * config.scale
    full = torch.softmax(torch.cat([scores, sink.expand(*scores.shape[:3], 1)], -1), -1)
    p, p_sink = full[..., :-1], full[..., -1:]
    keep = 1.0 - config.dropout
    mask = inputs.dropout_mask.double() if inputs.dropout_mask is not None else torch.ones_like(p)
    o_drop, o_plain = (p * mask / keep) @ v, p @ v
    forms = {"dO.O cuDNN's O": o, "dO.O with dropout (fp64)": o_drop, "dO.O without dropout": o_plain,
             "dO.O times (1-p)": o_drop * keep, "dO.O over (1-p)": o_drop / keep}  # fmt: skip
    print(f"   cuDNN dSink {got.tolist()}")
    for words, x in forms.items():
        want = -(p_sink * (d_o * x).sum(-1, keepdim=True)).sum((0, 2, 3))
        print(f"   {words:26s} {want.tolist()}  max |cuDNN - it| {(got - want).abs().max().item():.3g}")


def dsink() -> None:
    from tui.model.config import SdpaConfig

    base = dict(causal="none", sink=True, backward=True)
    cases = {
        "probe's: b1 h1 s2x1024 d128 p.35": SdpaConfig(b=1, h_q=1, h_kv=1, s_q=2, s_kv=1024, d_qk=128, d_v=128,
                                                        dropout=0.35, **base),
        "b2 h4 s128 d64 p.2": SdpaConfig(b=2, h_q=4, h_kv=4, s_q=128, s_kv=128, d_qk=64, d_v=64, dropout=0.2, **base),
        "the same, no dropout": SdpaConfig(b=2, h_q=4, h_kv=4, s_q=128, s_kv=128, d_qk=64, d_v=64, **base),
    }  # fmt: skip
    print("## dSink: which D_i = dO_i . O_i cuDNN's dSink = -sum P_sink D is of")
    for name, config in cases.items():
        try:
            dsink_case(name, config)
        except Exception as exc:  # noqa: BLE001 - one case's failure is printed, the next runs
            print(f"== {name}: {type(exc).__name__}: {exc}")


def det() -> None:
    from tui.engine.runner import Engine, RunOptions
    from tui.model.config import SdpaConfig

    print("## deterministic backward with a sink: executions whose bits differ from the first, of 20")
    engine = Engine(cache_size=4)
    for b, sink in ((4, True), (8, True), (8, False), (1, True)):
        config = SdpaConfig(b=b, h_q=1, h_kv=1, s_q=2, s_kv=1, d_qk=8, d_v=8, causal="none", sink=sink,
                            backward=True, deterministic=True)  # fmt: skip
        r = engine.run(config, RunOptions(autotune=False))
        m = engine._measurement(config, "backward")
        first = {n: t.clone() for n, t in m.outputs_of(m.built.graph.chosen).items()}
        differ = dict.fromkeys(first, 0)
        for _ in range(19):
            for n, t in m.outputs_of(m.built.graph.chosen).items():
                differ[n] += int(not bool((t == first[n]).all().item()))
        plan = next((p.name for p in m.built.graph.plans if p.index == m.built.graph.chosen), "?")
        print(
            f"b{b} sink {sink}: {r.status}, plan {plan}: " + ", ".join(f"{n} {c}" for n, c in differ.items())
        )


if __name__ == "__main__":
    steps = sys.argv[1:] or ["softcap", "det", "dsink"]
    for step in steps:
        {"softcap": softcap, "det": det, "dsink": dsink}[step]()
