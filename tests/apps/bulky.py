"""A workflow app for full-disk tests: its step waits for the file ``gate``, writes
``start``/``end`` lines to ``journal`` and returns ``size`` bytes of text, so its
commit needs room in the world."""

from __future__ import annotations

from pathlib import Path

import anyio

from workflow import step, workflow


def _journal(path: str, line: str) -> None:
    with open(path, "a") as out:
        out.write(line + "\n")


@step
async def bulky(journal: str, gate: str, size: int) -> str:
    _journal(journal, "start")
    while not Path(gate).exists():
        await anyio.sleep(0.02)
    _journal(journal, "end")
    return "x" * size


@workflow
async def bulky_flow(journal: str, gate: str, size: int) -> int:
    return len(await bulky(journal, gate, size))
