"""The docs' table of cuDNN against the fastest kernels, drawn from one `check --peers --json` run:
per preset and pass, cuDNN's pick, its fastest plan, each peer's kernel time, and the fastest
whose check passed with its margin over cuDNN's pick; a training preset's step (forward +
backward) as a row of its own.

    python -m tui check --peers fa4,flash,flex --json > check.json
    python -m benchmarks.peers_table check.json [--out table.md]

A cell is the median kernel time in µs; `FAIL` after it marks an output outside its tolerance
(never the winner); `-` a kernel that did not run (the check's JSON says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PEERS = (("FA4", "FA4"), ("FLASH", "FA2 (torch FLASH)"), ("Flex", "Flex"))
HEADER = ("preset", "pass", "cuDNN pick", "cuDNN fastest plan", *(t for _, t in PEERS), "fastest")


def cell(contender: dict | None) -> str:
    if contender is None:
        return "-"
    wrong = " FAIL" if contender.get("passed") is False else ""
    return f"{contender['kernel_us']:.1f}{wrong}"


def by_role(contenders: list[dict], role: str) -> dict | None:
    return next((c for c in contenders if c["role"] == role), None)


def fastest_plan(contenders: list[dict]) -> dict | None:
    """cuDNN's fastest plan: the pick itself when no other plan beat it."""
    return by_role(contenders, "fastest plan") or by_role(contenders, "pick")


def winner_cell(contenders: list[dict]) -> str:
    """The fastest contender whose check did not fail, with its margin over cuDNN's pick (where
    cuDNN declined the pass, the fastest peer, said to be alone)."""
    pick = by_role(contenders, "pick")
    fair = [c for c in contenders if c.get("passed") is not False]
    if not fair:
        return "-"
    best = min(fair, key=lambda c: c["kernel_us"])
    if pick is None:
        return f"{best['name']} (cuDNN declined)"
    return best["name"] if best is pick else f"{best['name']} {pick['kernel_us'] / best['kernel_us']:.2f}x"


def row(preset: str, kind: str, contenders: list[dict]) -> list[str]:
    named = {c["name"]: c for c in contenders if c["role"] == "peer"}
    peers = [cell(named.get(key)) for key, _ in PEERS]
    picks = [cell(by_role(contenders, "pick")), cell(fastest_plan(contenders))]
    return [preset, kind, *picks, *peers, winner_cell(contenders)]


def step(passes: list[dict]) -> list[dict]:
    """Forward + backward for each contender that timed both (cuDNN's pick with the pick's, its
    fastest plan with the fastest; a peer with itself), failed when either pass failed."""
    fwd, bwd = passes[0]["contenders"], passes[1]["contenders"]

    def key(c: dict) -> str:
        return c["role"] if c["role"] != "peer" else c["name"]

    backs = {key(c): c for c in bwd}
    summed = []
    for c in fwd:
        b = backs.get(key(c))
        if b is None:
            continue
        passed = None if None in (c["passed"], b["passed"]) else c["passed"] and b["passed"]
        summed.append({**c, "kernel_us": c["kernel_us"] + b["kernel_us"], "passed": passed})
    return summed


def table(check: dict) -> str:
    rows = []
    for case in check["cases"]:
        if case["case"] == "smoke":
            continue
        passes = [p for p in case.get("passes", []) if p.get("contenders")]
        if not passes:
            note = case.get("message") or "no kernel times in this file (a check run without --peers?)"
            rows.append([case["case"], "-", *["-"] * (len(HEADER) - 3), note.split(";")[0]])
            continue
        rows += [row(case["case"], p["kind"], p["contenders"]) for p in passes]
        if len(passes) == 2:
            rows.append(row(case["case"], "step", step(passes)))
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check_json", type=Path, help="the output of `check --peers ... --json`")
    parser.add_argument("--out", type=Path, help="write the table here (default: print it)")
    args = parser.parse_args(argv)
    try:
        text = table(json.loads(args.check_json.read_text()))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args.check_json}: not a `check --json` output ({exc})", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
