"""Whose is the soak's one-query dropout forward mismatch (tests/test_gpu_recipes.py's SOAK)?

The check applies the dropout mask that a second graph, the same graph also dumping its mask
(rng_dump), draws on the same seed and offset. This runs, on the same tensors: the timed plan, the
dumping graph of the same engine and knobs (twice), and the dumping graph of the heuristic's own
pick; and compares each O with the others and with the fp32 reference under each mask. If the
dumping graph's O agrees with the reference under its own mask while the timed plan's O does not,
cuDNN's kernel is right under the mask it draws and the two graphs draw different masks.

    python -m benchmarks.dropout_probe [--case NAME]
"""

from __future__ import annotations

import argparse

from tui.engine import storage
from tui.engine.graph import build
from tui.engine.measure import Measurement, plan_name
from tui.engine.passes import FORWARD_PASS
from tui.engine.reference import reference_fp32
from tui.engine.runner import Engine, RunOptions
from tui.engine.tensors import workspace
from tui.model.config import SdpaConfig

SOAK = SdpaConfig(b=1, h_q=32, h_kv=4, s_q=1, s_kv=512, d_qk=184, d_v=224, dtype="bf16", layout="SBHD",
                  causal="none", dropout=0.26)  # fmt: skip
MHA = SOAK.replace(h_q=4, h_kv=4, d_qk=128, d_v=128, layout="BSHD")
CASES = {
    "soak": SOAK,  # the soak's one-query dropout forward (tests/test_gpu_recipes.py)
    "bshd": SOAK.replace(layout="BSHD"),
    "d128": SOAK.replace(layout="BSHD", d_qk=128, d_v=128),
    "s_q2": SOAK.replace(s_q=2),
    "p0.01": MHA.replace(dropout=0.01),
    "mha": MHA,
}


def _dumping(config, built, handle, same):
    """The dumping graph (of the plan `same`, or its own pick) run once on the forward's tensors:
    (its plan's words, the mask, its O as numbers)."""
    import torch

    g = build(config, handle, rng_dump=True, every_plan=False, same_as=same)
    o = built.data["o"]
    dump = torch.zeros((config.b, config.h_q, config.s_q, config.s_kv), dtype=torch.float32, device="cuda")
    data = {**built.data, "o": torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device="cuda")}
    data["rng_dump"] = dump
    if "stats" in data:
        data["stats"] = torch.empty_like(data["stats"])
    g.graph.execute(g.variant_pack(data), workspace(torch, g), handle=handle)
    torch.cuda.synchronize()
    words = f"pinned {g.pinned_index} {g.pin_error or ''}".strip() if same else "its own pick"
    return words, dump, storage.logical(config, data, "o").float()


def probe(name: str, config: SdpaConfig, engine: Engine) -> None:
    r = engine.run(config, RunOptions(autotune=False, cross_check=True))
    p = r.passes[0]
    print(f"== {name}: {r.status} {r.message[:110]}")
    for c in p.checks:
        fp64 = c.reference_fp64
        print(f"   {c.output}: cuDNN {c.cudnn.max_abs if c.cudnn else None} (passed {c.passed}); fp32 ref vs fp64 "
              f"{fp64.max_abs if fp64 else '-'}")  # fmt: skip
    for note in p.notes:
        print("   note:", note[:200])
    built = engine._cache[config]["forward"]
    bench = engine.bench()
    m = Measurement(FORWARD_PASS, built, {}, bench)
    chosen = next(x for x in built.graph.plans if x.index == built.graph.chosen)
    print(f"   timed plan {plan_name(built.graph.plans, built.graph.chosen)}")
    timed = m.outputs_of(built.graph.chosen)["O"].float()
    inputs = m.inputs()
    same_words, mask, o_same = _dumping(config, built, bench.handle, chosen)
    _, mask2, o_same2 = _dumping(config, built, bench.handle, chosen)
    own_words, mask_own, o_own = _dumping(config, built, bench.handle, None)

    def ref(mk):
        return reference_fp32(config, inputs.q, inputs.k, inputs.v, inputs.bias, dropout_mask=mk)

    def d(a, b):
        return f"{(a - b).abs().max().item():.3g}"

    r_same, r_own = ref(mask), ref(mask_own)
    plain = reference_fp32(config.replace(dropout=0.0), inputs.q, inputs.k, inputs.v, inputs.bias)
    keys = mask[0, :, 0, :]  # (h, s_kv): where the dump kept a key, for each head
    where = {n: [round(keys[:, j::n].mean().item(), 3) for j in range(n)] for n in (2, 4, 8)}
    blocks = [round(keys[:, j : j + 64].mean().item(), 3) for j in range(0, config.s_kv, 64)]
    heads = [round(keys[i].mean().item(), 3) for i in range(min(keys.shape[0], 8))]
    print(f"   kept by key index mod n {where}; by block of 64 keys {blocks}; by head {heads}")
    print(
        f"   timed O vs the reference without dropout {d(timed, plain)} (|O| max {plain.abs().max().item():.3g})"
    )
    print(f"   dumping graph, same engine: {same_words}; its own pick: {own_words}")
    print(f"   mask kept {mask.mean().item():.3f}; same-engine dump twice equal {bool((mask == mask2).all())}; "
          f"same-engine vs own-pick masks differ at {(mask != mask_own).float().mean().item():.3f}")  # fmt: skip
    print(
        f"   timed O vs dumping O (same engine) {d(timed, o_same)}; twice {d(o_same, o_same2)}; vs own pick {d(timed, o_own)}"
    )
    print(f"   timed O vs ref(mask same) {d(timed, r_same)}; vs ref(mask own) {d(timed, r_own)}")
    print(
        f"   dumping O (same) vs ref(its mask) {d(o_same, r_same)}; dumping O (own) vs ref(its mask) {d(o_own, r_own)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=list(CASES), help="default: all")
    args = parser.parse_args(argv)
    engine = Engine(cache_size=8)
    for name in args.case or list(CASES):
        try:
            probe(name, CASES[name], engine)
        except Exception as exc:  # a probe that fails says so and the next runs
            print(f"== {name}: {type(exc).__name__}: {exc}"[:300])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
