"""Redraw the README's picture from a result recorded on the H200 (nothing runs):

uv run python docs/screenshot.py [RESULT.json] [docs/dashboard.svg]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tui.app import make_app
from tui.model.results import RunResult

HERE = Path(__file__).parent
RECORDED = HERE.parent / "tests" / "data" / "seed_h200.json"  # the seed's forward, every plan timed


async def draw(result: RunResult, out: Path, size: tuple[int, int] = (120, 40)) -> None:
    app = make_app(result.config, opened=result, start_engine=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else RECORDED
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "dashboard.svg"
    asyncio.run(draw(RunResult.from_json(source.read_text(encoding="utf-8")), target))
    print(f"wrote {target}")
