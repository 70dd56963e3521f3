"""One line per SDPA option: does it build, how many plans, kernel time, max error; for the
training cases also the backward's plans, kernel time, TFLOPS and worst gradient error.

    python -m benchmarks.surface [--json OUT]
"""

from __future__ import annotations

import argparse
import json

from tui.engine.runner import Engine, RunOptions
from tui.model.config import SdpaConfig

BASE = SdpaConfig(b=2, h_q=16, h_kv=16, s_q=2048, s_kv=2048, d_qk=128, d_v=128, dtype="bf16")
GQA = BASE.replace(h_kv=4)
CASES = {
    "window top-left": GQA.replace(window=512),
    "window bottom-right": GQA.replace(s_q=1024, causal="bottom_right", window=512),
    "window no causal": GQA.replace(causal="none", window=512),
    "padding": GQA.replace(seq_lens_q=(2048, 700), seq_lens_kv=(2048, 1500)),
    "padding bottom-right": GQA.replace(
        causal="bottom_right", seq_lens_q=(100, 700), seq_lens_kv=(2048, 1500)
    ),
    "decode s_q=1": GQA.replace(s_q=1, s_kv=8192, causal="bottom_right"),
    "alibi": BASE.replace(alibi=True),
    "bias 1x1": BASE.replace(bias="1x1", causal="none"),
    "bias bxh": BASE.replace(bias="bxh"),
    "d_qk 192 / d_v 128": BASE.replace(d_qk=192),
    "d 256": BASE.replace(d_qk=256, d_v=256),
    "d 512": BASE.replace(b=1, d_qk=512, d_v=512, s_q=1024, s_kv=1024),
    "dropout 0.1": BASE.replace(dropout=0.1, dropout_seed=42),
    "implementation composite": BASE.replace(implementation="composite"),
    "implementation unified": BASE.replace(implementation="unified"),
    "fp8": BASE.replace(dtype="fp8_e4m3", causal="none"),
    "fp8 causal": BASE.replace(dtype="fp8_e4m3"),
    "fp8 large (b2 h16 s4096)": BASE.replace(dtype="fp8_e4m3", causal="none", s_q=4096, s_kv=4096),
    "fp8 causal bottom-right": BASE.replace(dtype="fp8_e4m3", causal="bottom_right"),
    "fp8 bf16 output": BASE.replace(dtype="fp8_e4m3", out_dtype="bf16"),
    "backward": GQA.replace(backward=True),
    "backward deterministic": GQA.replace(backward=True, deterministic=True),
    "backward window": GQA.replace(backward=True, window=512),
    "backward padding": GQA.replace(backward=True, seq_lens_q=(2048, 700), seq_lens_kv=(2048, 1500)),
    "backward alibi": BASE.replace(backward=True, alibi=True),
    "backward bias 1xh": BASE.replace(backward=True, bias="1xh"),
    "backward dropout": BASE.replace(backward=True, dropout=0.1, dropout_seed=42),
    "backward d 192/128": BASE.replace(backward=True, d_qk=192),
    "backward d 256": BASE.replace(backward=True, d_qk=256, d_v=256),
    "backward fp8": BASE.replace(backward=True, dtype="fp8_e4m3"),
    "backward fp8 deterministic": BASE.replace(backward=True, dtype="fp8_e4m3", deterministic=True),
}


def pass_row(p) -> dict:
    """What one pass gave: plans, kernel time, TFLOPS, each output's error and atol, FP8 amax."""
    return {
        "kind": p.kind,
        "status": p.status,
        "plans": len(p.plans),
        "kernel_us": round(p.timing.median_us, 2) if p.timing else None,
        "tflops": round(p.tflops, 1) if p.tflops else None,
        "max_abs_error": {c.output: c.cudnn.max_abs for c in p.checks if c.cudnn},
        "atol": {c.output: c.atol for c in p.checks},
        "repeatable": p.repeatable,
        "amax": p.fp8.amax if p.fp8 else None,
        "reference_amax": p.fp8.reference_amax if p.fp8 else None,
    }


def pass_line(p) -> str:
    errors = " ".join(f"{c.output} {c.cudnn.max_abs:.1e}/{c.atol:.1e}" for c in p.checks if c.cudnn)
    kernel = f"{p.timing.median_us:.2f} us {p.tflops or 0:.1f} TFLOPS" if p.timing else "not timed"
    return f"{p.kind}: plans {len(p.plans)} {kernel} err/atol {errors or '-'}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    engine = Engine(cache_size=2)
    rows = []
    for name, config in CASES.items():
        r = engine.run(config, RunOptions(autotune=False))
        row = {"option": name, "config": config.label(), "status": r.status, "message": r.message,
               "passes": [pass_row(p) for p in r.passes]}  # fmt: skip
        rows.append(row)
        line = " | ".join(pass_line(p) for p in r.passes)
        print(f"{name:26} {r.status:12} {line}  {r.message[:160]}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
