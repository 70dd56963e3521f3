"""FlashInfer's kernel time by an independent loop, beside the tool's `run --peers flashinfer`.

The loop imports nothing of the project: torch and `flashinfer` only. For each shape it makes a
bf16 paged cache (HND pages, shuffled as a serving allocator leaves them) or dense tokens, plans
its wrapper once (the first plan of a kernel family compiles it: timed apart, and cached under
~/.cache/flashinfer, so this script also warms the cache the tool's runs then find), warms up,
then times N eager calls under torch.profiler (CUPTI kernel records), each after a write over
twice the L2 (the flush's kernels recognised by name and left out): the median of the calls'
kernel sums. Then, unless --no-tool, the tool's own figure for the same configuration in the same
process, through the project's Engine with the L2 flushed (`run --peers flashinfer --l2-flush
--no-autotune`, burst), and their ratio.

    uv run python -m benchmarks.flashinfer_loop [--calls 30] [--no-tool] [--shape NAME ...]
"""

from __future__ import annotations

import argparse
import random
import time

from .cupti_loop import median_kernel_us

DENSE_PAGE = 16  # tokens a page of a dense cache seen as pages (vLLM's default block)
# name: (b, h_q, h_kv, s_q, s_kv, d, page size or 0 for dense); causal bottom-right (FlashInfer's)
SHAPES = {
    "paged decode b64 p16": (64, 32, 8, 1, 4096, 128, 16),  # llama3-8b-paged-decode-p16
    "paged prefill b4 p64": (4, 32, 8, 512, 2048, 128, 64),  # llama3-8b-chunked-prefill
    "dense decode b16": (16, 32, 8, 1, 8192, 128, 0),  # llama3-8b-decode
    "ragged prefill b1 s4096": (1, 32, 8, 4096, 4096, 128, 0),
}


def wrapper_for(torch, fi, shape: tuple[int, ...]):
    """(a call of the planned wrapper, plan seconds): the cache and the plan FlashInfer's docs
    describe, indptr / indices / last_page_len for full pages in shuffled order."""
    b, h_q, h_kv, s_q, s_kv, d, page = shape
    dev, bf16 = "cuda", torch.bfloat16
    ints = lambda xs: torch.tensor(xs, dtype=torch.int32, device=dev)  # noqa: E731
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device=dev)
    q = torch.randn(b * s_q, h_q, d, device=dev, dtype=bf16)
    common = {"q_data_type": bf16, "kv_data_type": bf16, "sm_scale": d**-0.5}
    # dense decode: the K and V of BSHD memory as NHD pages of 16 tokens, each sequence's in a row,
    # as the tool reads them (peer_flashinfer.DENSE_PAGE); a paged cache's pages in shuffled order
    page = page or (DENSE_PAGE if s_q == 1 else s_kv)
    per_seq = -(-s_kv // page)
    ids = list(range(b * per_seq))
    if shape[-1]:
        random.Random(0).shuffle(ids)
    layout = "HND" if shape[-1] else "NHD"  # dense BSHD memory is NHD pages, as the tool reads it
    dims = (b * per_seq, h_kv, page, d) if shape[-1] else (b * per_seq, page, h_kv, d)
    pages = [torch.randn(dims, device=dev, dtype=bf16) for _ in range(2)]
    paged = (ints([i * per_seq for i in range(b + 1)]), ints(ids), ints([s_kv - (per_seq - 1) * page] * b))
    t0 = time.perf_counter()
    if s_q == 1:
        w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, layout)
        w.plan(*paged, h_q, h_kv, d, page, **common)
        call = lambda: w.run(q, tuple(pages))  # noqa: E731
    elif shape[-1]:
        w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "HND")
        w.plan(ints([i * s_q for i in range(b + 1)]), *paged, h_q, h_kv, d, page, causal=True, **common)
        call = lambda: w.run(q, tuple(pages))  # noqa: E731
    else:
        k, v = (torch.randn(b * s_kv, h_kv, d, device=dev, dtype=bf16) for _ in range(2))
        w = fi.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
        w.plan(ints([i * s_q for i in range(b + 1)]), ints([i * s_kv for i in range(b + 1)]), h_q, h_kv, d,
               causal=True, **common)  # fmt: skip
        call = lambda: w.run(q, k, v)  # noqa: E731
    torch.cuda.synchronize()
    return call, time.perf_counter() - t0


def loop(shape: tuple[int, ...], calls: int) -> dict[str, float]:
    import flashinfer as fi
    import torch

    call, plan_s = wrapper_for(torch, fi, shape)
    call()
    torch.cuda.synchronize()
    us, per_call = median_kernel_us(torch, call, calls)
    return {"plan_s": plan_s, "us": us, "kernels": per_call}


def tool(shape: tuple[int, ...], calls: int) -> dict[str, float | str]:
    """The tool's figures for the same configuration: FlashInfer's kernel time and cuDNN's pick's."""
    from tui.engine.runner import Engine, RunOptions
    from tui.model.config import SdpaConfig
    from tui.model.options import TimingOptions

    b, h_q, h_kv, s_q, s_kv, d, page = shape
    config = SdpaConfig(b=b, h_q=h_q, h_kv=h_kv, s_q=s_q, s_kv=s_kv, d_qk=d, d_v=d, dtype="bf16",
                        causal="bottom_right", page_size=page or None)  # fmt: skip
    options = RunOptions(
        peers=("flashinfer",), autotune=False, timing=TimingOptions(l2_flush=True, replays=calls)
    )
    r = Engine().run(config, options)
    peer = r.forward.field_peers[0] if r.forward is not None and r.forward.field_peers else None
    if peer is None or peer.timing is None:
        return {"why": peer.reason if peer is not None else r.message or r.status}
    o = next((c for c in r.forward.checks if c.output == "O"), None)
    error = o.peers.get(peer.name) if o is not None else None
    return {
        "us": peer.timing.median_us,
        "cudnn_us": r.forward.timing.median_us if r.forward.timing else float("nan"),
        "error": f"{error.max_abs:.2e} {'pass' if error.passed else 'FAIL'}" if error is not None else "-",
        "what": peer.description,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="timed calls a shape (the median's N)")
    parser.add_argument("--no-tool", action="store_true", help="the independent loop only")
    parser.add_argument("--shape", action="append", choices=list(SHAPES), help="only these (default: all)")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    for name in args.shape or list(SHAPES):
        shape = SHAPES[name]
        got = loop(shape, args.calls)
        line = f"{name:24s} loop {got['us']:9.1f} µs ({got['kernels']} kernels a call, planned in {got['plan_s']:.2f} s)"
        if not args.no_tool:
            t = tool(shape, args.calls)
            if "why" in t:
                line += f" | tool: FlashInfer did not run: {t['why']}"
            else:
                line += (
                    f" | tool {t['us']:9.1f} µs, tool/loop {t['us'] / got['us']:.3f}, O {t['error']}, "
                    f"cuDNN {t['cudnn_us']:.1f} µs (cuDNN/FlashInfer {t['cudnn_us'] / t['us']:.3f}) | {t['what']}"
                )
        print(line, flush=True)


if __name__ == "__main__":
    main()
