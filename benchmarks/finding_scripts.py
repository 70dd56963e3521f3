"""The reproduction scripts of the hunt's cuDNN findings, each run in a fresh process.

A bundle's `repro.py` is `present.repro.script(config, seed, words)` of its minimal configuration
(jobs/hunt_findings.py:write_bundle); this writes the same script for each known wrong result the
hunt found on the H200 (tests/test_known_wrong.py's PADDED and PAGED), and for each a neighbour
that should pass (zeros in the unused slots), then runs each as `python3 repro.py` with nothing of
the tool on its path, and prints its exit status and RESULT line.

    python -m benchmarks.finding_scripts [--out FOLDER]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tui.model.config import SdpaConfig
from tui.present.repro import script

TINY = dict(b=1, h_q=1, h_kv=1, s_q=2, d_qk=8, d_v=8, dtype="fp16", causal="none")
CASES = {
    "padded-nan": SdpaConfig(
        **TINY, s_kv=12, seq_lens_q=(2,), seq_lens_kv=(11,), inputs="seed:136378655,pad:nan"
    ),
    "padded-zero": SdpaConfig(
        **TINY, s_kv=12, seq_lens_q=(2,), seq_lens_kv=(11,), inputs="seed:136378655,pad:zero"
    ),
    "paged-nan": SdpaConfig(**TINY, s_kv=65, page_size=64, inputs="seed:341662028,pad:nan"),
    "paged-zero": SdpaConfig(**TINY, s_kv=65, page_size=64, inputs="seed:341662028,pad:zero"),
}
WORDS = "NaN in the key/value slots past a sequence's real length reaches O (cuDNN 9.19, Hopper)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/findings", help="where the scripts are written")
    args = parser.parse_args(argv)
    out = Path(args.out)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    site = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and "proj" not in p]
    env["PYTHONPATH"] = os.pathsep.join(site)  # cudnn and torch, not the tool
    for name, config in CASES.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "repro.py"
        path.write_text(script(config, 0, WORDS if name.endswith("nan") else ""))
        lines = len(path.read_text().splitlines())
        run = subprocess.run(
            [sys.executable, "repro.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=300
        )
        last = [line for line in run.stdout.splitlines() if line.startswith("RESULT")]
        tail = last[-1] if last else (run.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{name:12s} {lines:4d} lines  exit {run.returncode}  {tail[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
