"""The Sweep pane with real figures: the dashboard, headless with the real engine, sweeps a GQA
prefill over the sequence length with FlashAttention-2 and FlexAttention beside cuDNN, then saves
an SVG screenshot of the pane and the rows (one JSON object a point, as `sweep --out` writes them).

    python -m benchmarks.sweep_screenshot --out DIR [--vary s=1024..32768x2] [--timeout 600]

The form: b=1, h_q=32, h_kv=8, d=128, bf16, causal top-left; the FLASH and Flex peers ticked. On a
machine without a GPU it runs too, and ends quickly: every point is cpu_only, untimed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from textual.widgets import Checkbox, Input

SIZE = (160, 48)
PEERS = ("flash", "flex")


async def wait_for(pilot, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the dashboard did not {what} within {timeout:g} s")
        await pilot.pause(0.05)


async def sweep(out: str, vary: str, timeout: float) -> dict:
    """Run the sweep in the dashboard; the screenshot and rows go to `out`; a summary is returned."""
    from tui.app import make_app
    from tui.model.config import SdpaConfig

    base = SdpaConfig(b=1, h_q=32, h_kv=8, s_q=1024, s_kv=1024, d_qk=128, d_v=128, dtype="bf16",
                      causal="top_left")  # fmt: skip
    app = make_app(base)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.result is not None, timeout, "show the form's first result")
        for key in PEERS:
            app.query_one(f"#f-peer-{key}", Checkbox).value = True
        await pilot.press("alt+9")  # the Sweep pane, made the first time it is shown
        await wait_for(pilot, lambda: app.pane("sweep") is not None, timeout, "show the Sweep pane")
        field = app.query_one("#sweep-vary-1", Input)
        field.focus()
        await pilot.press(*vary, "enter")  # typed, as a user would
        pane = app.query_one("#sweep")
        await wait_for(pilot, lambda: pane.progress.total > 0, 30, "start the sweep")
        started = time.monotonic()
        await wait_for(pilot, lambda: bool(pane.progress.finished), timeout, "finish every point")
        await pilot.pause(0.5)  # the last row and the chart drawn
        os.makedirs(out, exist_ok=True)
        app.save_screenshot("sweep.svg", path=out)
        with open(os.path.join(out, "sweep.jsonl"), "w") as f:
            for row in pane.rows:
                f.write(json.dumps(row) + "\n")
        return {
            "vary": vary,
            "points": pane.progress.total,
            "done": len(pane.rows),
            "ended": pane.progress.finished,
            "seconds": round(time.monotonic() - started, 1),
            "statuses": [row["status"] for row in pane.rows],
            "gpu": next((row["gpu"] for row in pane.rows if row["gpu"]), "none"),
            "lines": list(pane.lines),
            "status_line": str(app.query_one("#sweep-status").render()),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", default=os.environ.get("OUT", "."), help="folder of sweep.svg and sweep.jsonl"
    )
    parser.add_argument("--vary", default="s=1024..32768x2", help="the Sweep pane's first vary")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds the points may take")
    args = parser.parse_args()
    summary = asyncio.run(sweep(args.out, args.vary, args.timeout))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
