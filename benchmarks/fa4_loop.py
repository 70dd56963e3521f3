"""FlashAttention-4's kernel time by an independent loop, beside the tool's `run --peers fa4`.

The loop imports nothing of the project: torch and `flash_attn.cute` only. For each shape it
makes q, k, v in BSHD (bf16), calls `flash_attn_func` once (the compile, timed apart), warms up,
then times N eager calls under torch.profiler (CUPTI kernel records), each call after a write
over twice the L2 (the flush's kernels recognised by name and left out): the median of the N
calls' kernel sums. Then, unless --no-tool, the tool's own figure for the same configuration in
the same process, through the project's Engine with the L2 flushed (`run --peers fa4 --l2-flush
--no-autotune`, burst), and their ratio: within 3% is the target.

    uv run python -m benchmarks.fa4_loop [--calls 30] [--no-tool]

The shapes: b=1 h=64/8 d=128 bf16 s=4096 causal, the same at s=8192, and a decode step (b=16,
one query against 8192 keys, bottom-right causal).
"""

from __future__ import annotations

import argparse
import time

from .cupti_loop import median_kernel_us

SHAPES = {  # name: (b, h_q, h_kv, s_q, s_kv, d); causal, aligned bottom-right (FA4's only way)
    "s4096 causal": (1, 64, 8, 4096, 4096, 128),
    "s8192 causal": (1, 64, 8, 8192, 8192, 128),
    "decode b16 s1x8192": (16, 64, 8, 1, 8192, 128),
}


def kept_pairs(s_q: int, s_kv: int) -> int:
    """Scores a bottom-right causal mask keeps per head: query i sees keys up to i + s_kv - s_q."""
    return sum(min(s_kv, max(0, i + 1 + s_kv - s_q)) for i in range(s_q))


def flops(shape: tuple[int, ...]) -> int:
    b, h_q, _h_kv, s_q, s_kv, d = shape
    return 2 * b * h_q * kept_pairs(s_q, s_kv) * (d + d)


def loop(shape: tuple[int, ...], calls: int) -> dict[str, float]:
    """The independent reading of one shape: compile seconds, median kernel µs of `calls` calls."""
    import torch
    from flash_attn.cute import flash_attn_func

    b, h_q, h_kv, s_q, s_kv, d = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn((b, s_q, h_q, d), device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn((b, s_kv, h_kv, d), device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn((b, s_kv, h_kv, d), device="cuda", dtype=torch.bfloat16, generator=g)
    scale = d**-0.5

    def call():
        flash_attn_func(q, k, v, softmax_scale=scale, causal=True)

    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    us, per_call = median_kernel_us(torch, call, calls)
    return {"compile_s": compile_s, "us": us, "kernels": per_call}


def tool(shape: tuple[int, ...], calls: int) -> dict[str, float | str]:
    """The tool's figures for the same configuration: FA4's kernel time and cuDNN's pick's."""
    from tui.engine.runner import Engine, RunOptions
    from tui.model.config import SdpaConfig
    from tui.model.options import TimingOptions

    b, h_q, h_kv, s_q, s_kv, d = shape
    config = SdpaConfig(
        b=b, h_q=h_q, h_kv=h_kv, s_q=s_q, s_kv=s_kv, d_qk=d, d_v=d, dtype="bf16", causal="bottom_right"
    )
    options = RunOptions(peers=("fa4",), autotune=False, timing=TimingOptions(l2_flush=True, replays=calls))
    r = Engine().run(config, options)
    peer = r.forward.field_peers[0] if r.forward is not None and r.forward.field_peers else None
    if peer is None or peer.timing is None:
        return {"why": peer.reason if peer is not None else r.message or r.status}
    o = next((c for c in r.forward.checks if c.output == "O"), None)
    error = o.peers.get(peer.name) if o is not None else None
    return {
        "us": peer.timing.median_us,
        "cudnn_us": r.forward.timing.median_us if r.forward.timing else float("nan"),
        "compile_s": peer.compile_seconds or 0.0,
        "error": f"{error.max_abs:.2e} {'pass' if error.passed else 'FAIL'}" if error is not None else "-",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="timed calls a shape (the median's N)")
    parser.add_argument("--no-tool", action="store_true", help="the independent loop only")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    for name, shape in SHAPES.items():
        got = loop(shape, args.calls)
        tf = flops(shape) / (got["us"] * 1e6)
        line = (
            f"{name:20s} loop {got['us']:9.1f} µs {tf:6.1f} TFLOPS ({got['kernels']} kernels a call, "
            f"compiled in {got['compile_s']:.1f} s)"
        )
        if not args.no_tool:
            t = tool(shape, args.calls)
            if "why" in t:
                line += f" | tool: FA4 did not run: {t['why']}"
            else:
                line += (
                    f" | tool {t['us']:9.1f} µs, tool/loop {t['us'] / got['us']:.3f}, "
                    f"O {t['error']}, cuDNN {t['cudnn_us']:.1f} µs (cuDNN/FA4 {t['cudnn_us'] / t['us']:.3f})"
                )
        print(line, flush=True)


if __name__ == "__main__":
    main()
