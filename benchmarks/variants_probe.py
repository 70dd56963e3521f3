"""Which score modifiers (variants) cuDNN builds on this GPU, forward and backward, with which
plans, at what kernel time and with which check verdict, beside FlexAttention (and FA4 where the
`peers` extra brings it): a markdown table for docs/VARIANTS.md.

Every row runs through the project's Engine, as `sdpa-explorer run --variant ... --peers flex,fa4`
would: cuDNN's score_mod sub-graph built (without the plan cache, which cannot hold a callback),
every plan timed, the chosen one checked against the fp32 reference that applies the same
modifier; the peers timed and checked on the same tensors. Where cuDNN refuses a pass (or is
known to: its graph is then not built) the row gives cuDNN's words and the engine still times and
checks the peers on the pass's tensors (engine/measure.py), so the variant has their figures;
where a pass was not run at all, Flex is run by this script alone on the inputs the engine draws
(timed with CUDA events, checked against the same reference).

    uv run python -m benchmarks.variants_probe [--quick] [--json out.json]

--quick: s=2048 instead of 4096 (and the presets left out), for a first look.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from tui.model.config import SdpaConfig

SHAPE = dict(b=2, h_q=16, h_kv=8, d_qk=128, d_v=128, dtype="bf16", layout="BSHD", backward=True)
VARIANTS = (
    ("built-in causal (no modifier)", dict(causal="top_left", variant="none")),
    ("softcap:50", dict(causal="none", variant="softcap:50")),
    ("softcap-causal:50", dict(causal="none", variant="softcap-causal:50")),
    ("softcap-causal:50,1024", dict(causal="none", variant="softcap-causal:50,1024")),
    ("prefix-lm:1024", dict(causal="none", variant="prefix-lm:1024")),
    ("document:4 docs", dict(causal="none", variant="document:{half},{quarter},{eighth},{eighth}")),
)
PRESETS = (
    "gemma2-9b-softcap",
    "gemma2-9b-global-softcap",
    "paligemma-prefix-lm",
    "llama3-8b-packed-documents",
)
PEERS = ("flex", "fa4")


def cases(s: int, presets: bool) -> list[tuple[str, SdpaConfig]]:
    out = []
    for name, changes in VARIANTS:
        variant = changes["variant"].format(half=s // 2, quarter=s // 4, eighth=s // 8)
        out.append((name, SdpaConfig(**SHAPE, s_q=s, s_kv=s, causal=changes["causal"], variant=variant)))
    if presets:
        from tui.store.presets import find

        out += [(f"preset {p}", find(p).config) for p in PRESETS]
    return out


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _verdict(p: Any) -> str:
    if p.status not in ("ok", "mismatch"):
        return p.status
    worst = max((c.cudnn.max_abs for c in p.checks if c.cudnn is not None), default=None)
    return f"{'pass' if p.passed else 'FAIL'} ({worst:.2g})" if worst is not None else str(p.passed)


def _peer(p: Any, short: str) -> str:
    found = next((x for x in p.field_peers if x.short == short), None)
    if found is None:
        return "-"
    if not found.ran:
        return f"not run: {found.reason}"
    errors = [c.peers.get(found.name) for c in p.checks]
    ok = all(e.passed for e in errors if e is not None)
    return f"{_us(found.timing.median_us)} ({'pass' if ok else 'FAIL'})"


def flex_alone(config: SdpaConfig, kind: str) -> str:
    """Flex on the engine's inputs where cuDNN refused the pass: CUDA events, the same reference."""
    import torch

    from tui.engine.peer_base import Tensors
    from tui.engine.peers import ADAPTERS
    from tui.engine.reference import drawn_values, reference_fp32, reference_grads
    from tui.engine.tolerances import compare, tolerance

    adapter = ADAPTERS["flex"]
    values = drawn_values(config, "cuda", 0)
    q, k, v = (values[n] for n in ("q", "k", "v"))
    t = Tensors(q, k, v)
    try:
        if kind == "forward":
            prepared = adapter.prepare(config, t)
        else:
            prepared = adapter.prepare_backward(config, t, values["dO"].to(q.dtype))
    except Exception as exc:  # Flex's own refusal, in its words
        return f"refused: {str(exc).splitlines()[0][:120]}"
    times = []
    for _ in range(25):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = prepared.run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    if kind == "forward":
        refs, got = {"O": reference_fp32(config, q, k, v)}, {"O": out}
    else:
        grads = reference_grads(config, q, k, v, values["dO"])
        refs, got = dict(zip(("dQ", "dK", "dV"), grads, strict=True)), out
    ok = True
    for name, ref in refs.items():
        atol, rtol = tolerance(config, ref, grad=kind == "backward")
        ok &= compare(got[name].float(), ref, atol, rtol, None).passed
    return f"{statistics.median(times[5:]):,.1f} events ({'pass' if ok else 'FAIL'})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="s=2048, no presets")
    parser.add_argument("--json", help="also write every row as JSON here")
    args = parser.parse_args()

    from tui.engine.runner import Engine
    from tui.model.options import PEER_KEYS, RunOptions

    engine = Engine()
    env = engine.environment()
    if not env.gpu_available:
        print(f"no GPU: {env.unavailable_reason}", file=sys.stderr)
        return 1
    peers = tuple(p for p in PEERS if p in PEER_KEYS)
    print(f"cuDNN {env.cudnn_backend_version}, frontend {env.frontend_version}, {env.gpu_name}; "
          f"kernel times in µs (median), check: verdict (worst |error|)\n")  # fmt: skip
    header = "| variant | shape | pass | cuDNN | plans built | cuDNN µs | check | Flex µs | FA4 µs |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    rows = []
    for name, config in cases(2048 if args.quick else 4096, presets=not args.quick):
        r = engine.run(config, RunOptions(peers=peers))
        shape = config.label().split(" bf16")[0]
        for kind in ("forward", "backward"):
            p = r.pass_of(kind)
            if p is None and kind == "backward" and not config.backward:
                continue  # a preset without a training step (the prefix-LM's)
            if p is None:
                cell = f"not run ({r.message[:80]})" if kind == "backward" else r.message[:120]
                print(f"| {name} | {shape} | {kind} | {cell} | | | | {flex_alone(config, kind)} | |")
                rows.append(dict(variant=name, pass_=kind, status="not run", message=r.message))
                continue
            built = [x for x in p.plans if x.built]
            ran = p.status in ("ok", "mismatch")
            known = (
                p.status == "known_issue"
            )  # its words, long, are the same for every such row: in the notes
            cudnn = "builds" if ran else ("known refusal" if known else f"{p.status}: {p.message[:100]}")
            flex = _peer(p, "Flex")  # the engine runs the peers where cuDNN declines the pass too
            time = p.timing.median_us if p.timing else None
            plans = ", ".join(sorted({x.name for x in built}))[:80] or "-"
            print(f"| {name} | {shape} | {kind} | {cudnn} | {len(built)}: {plans} | {_us(time)} | "
                  f"{_verdict(p)} | {flex} | {_peer(p, 'FA4')} |")  # fmt: skip
            rows.append(dict(variant=name, config=config.to_dict(), pass_=kind, status=p.status,
                             message=p.message, plans=[x.name for x in built], kernel_us=time,
                             passed=p.passed, flex=flex, notes=list(p.notes)))  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
