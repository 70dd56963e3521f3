"""What a plan cache on disk would save, measured with the engine's own graphs: for each plan of a
configuration, the time to build it against the time to load it from its serialized blob into a
fresh graph, the blob's size, and whether the loaded plan writes the same output bits.

    python -m benchmarks.plan_serialization [--preset NAME] [--out result.json]

Needs a GPU. A plan's blob is taken with serialize() right after build_plan_at_index(i), which
selects that plan; the loaded graph is executed with its tensors keyed by the uids the defining
graph gave them (a deserialized graph has no named tensors).
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.figures import save


def measure(config, seed: int = 0) -> dict:
    import cudnn
    import torch

    from tui.engine.graph import build
    from tui.engine.tensors import device_tensors, workspace

    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    t0 = time.perf_counter()
    g = build(config, handle)
    first_build = time.perf_counter() - t0
    data = device_tensors(config, "cuda", seed)
    uids = {name: t.get_uid() if hasattr(t, "get_uid") else t.uid for name, t in g.tensors.items()}
    rows = []
    for plan in g.plans:
        if not plan.built:
            continue
        row = {"index": plan.index, "name": plan.name, "source": plan.source}
        try:
            t0 = time.perf_counter()
            g.graph.build_plan_at_index(plan.index)
            row["build_s"] = time.perf_counter() - t0
            blob = bytes(g.graph.serialize(as_bytes=True))
            row["blob_bytes"] = len(blob)
            ws = workspace(torch, g)
            g.graph.execute_plan_at_index(g.variant_pack(data), ws, index=plan.index, handle=handle)
            torch.cuda.synchronize()
            want = data["o"].clone()
            t0 = time.perf_counter()
            loaded = cudnn.pygraph(handle=handle)
            loaded.deserialize(handle, blob)
            row["load_s"] = time.perf_counter() - t0
            row["loaded_workspace"] = int(loaded.get_workspace_size())
            data["o"].fill_(float("nan"))
            pack = {uids[name]: data[name] for name in g.tensors}
            ws = torch.empty(max(row["loaded_workspace"], 1), dtype=torch.uint8, device="cuda")
            loaded.execute(pack, ws, handle=handle)
            torch.cuda.synchronize()
            row["same_bits"] = bool(torch.equal(want.view(torch.int16), data["o"].view(torch.int16)))
        except Exception as exc:  # a plan the cache could not hold is a finding, not a stop
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        rows.append(row)
    return {"config": config.label(), "first_build_s": first_build, "plans": rows}


def main(argv: list[str] | None = None) -> int:
    from tui.store.presets import find

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", action="append", default=[], help="a preset to measure (repeatable)")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    names = args.preset or ["gpt2-seed", "llama3-8b-prefill", "llama3-8b-paged-decode-p64"]
    figures = [measure(find(name).config) for name in names]
    for f in figures:
        print(f["config"], f"first build {f['first_build_s']:.3f} s")
        for row in f["plans"]:
            print("  ", json.dumps(row))
    save(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
