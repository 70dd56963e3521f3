"""Esc to stopped: a CPU check of a preset cancelled through the engine process, as the
dashboard's Esc cancels it, at staggered moments of the check (its inputs drawn, torch's CPU
peer, the fp32 reference), and the time from the cancel to the cancelled result.

    python -m benchmarks.cancel [--preset llama3-8b-decode] [--repeat 5] [--out result.json]

The engine process is told it has no GPU (the CPU check runs on any machine). The first run is
whole: its wall time and the moments its steps began place the cancels, one in each fifth of
it. Target: at most 1 s from the cancel to the result (the chunks of the CPU check are a tenth
of a second or so: tui.engine.reference.CPU_CHUNK_FLOPS).
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import time

from benchmarks.figures import save
from tui.model.options import RunOptions
from tui.model.results import Environment
from tui.process.client import EngineClient, EngineDied, EngineProgress, EngineReady, EngineResult
from tui.store.presets import find

NO_GPU = Environment(gpu_available=False, unavailable_reason="no GPU (benchmark)")


def answer(events: queue.Queue, request_id: int, steps: list | None = None) -> EngineResult:
    """The request's result; `steps` gets (seconds since now, words) of its progress."""
    t0 = time.perf_counter()
    while True:
        event = events.get(timeout=600)
        if isinstance(event, EngineProgress) and event.request_id == request_id and steps is not None:
            steps.append((round(time.perf_counter() - t0, 3), event.text))
        elif isinstance(event, EngineResult) and event.request_id == request_id:
            return event
        elif isinstance(event, EngineDied):
            raise RuntimeError(f"the engine process died: {event.reason}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama3-8b-decode")
    parser.add_argument("--repeat", type=int, default=5, help="cancels; the median is reported")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    config = find(args.preset).config
    events: queue.Queue = queue.Queue()
    client = EngineClient(environment_override=NO_GPU, log_file=None)
    client.start(events.put)
    try:
        while not isinstance(events.get(timeout=600), EngineReady):
            pass
        steps: list = []
        t0 = time.perf_counter()
        whole = answer(events, client.submit(config, RunOptions()), steps)
        figures: dict = {
            "preset": args.preset,
            "whole_check_s": round(time.perf_counter() - t0, 2),
            "whole_status": whole.result.status,
            "steps": steps,
            "cancels": [],
        }
        for i in range(args.repeat):
            after = figures["whole_check_s"] * (i + 0.5) / args.repeat
            request_id = client.submit(config, RunOptions())
            time.sleep(after)  # a moment of the run, not a wait for a state: what is measured is after it
            asked = time.perf_counter()
            client.cancel()
            stopped = answer(events, request_id)
            figures["cancels"].append(
                {
                    "after_s": round(after, 2),
                    "stopped_s": round(time.perf_counter() - asked, 3),
                    "status": stopped.result.status,
                    "message": stopped.result.message,
                }
            )
        figures["esc_to_stopped_median_s"] = round(
            statistics.median(c["stopped_s"] for c in figures["cancels"]), 3
        )
        figures["esc_to_stopped_max_s"] = max(c["stopped_s"] for c in figures["cancels"])
    finally:
        client.close()
    print(json.dumps(figures, indent=1))
    save(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
