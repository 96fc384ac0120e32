"""A workflow app for the composition CLI tests: a stream, a child run, a breakable step."""

from __future__ import annotations

from workflow import start, step, workflow, write_stream

BROKEN: set[int] = set()
"""Stage numbers that fail (a test edits this, then retries the run)."""


@step(max_retries=0)
async def stage(n: int) -> int:
    if n in BROKEN:
        raise RuntimeError(f"stage {n} is broken")
    return n


@workflow
async def helper() -> str:
    return "helped"


@workflow
async def reporter() -> int:
    for pct in (0, 50, 100):
        await write_stream("progress", {"pct": pct})
    kid = await start(helper)
    await kid.result()
    total = 0
    for n in (1, 2, 3):
        total += await stage(n)
    return total
