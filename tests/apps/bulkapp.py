"""Runs for the bulk-action tests, and a process that runs one bulk action.

``python -m tests.apps.bulkapp URL ACTION QUERY`` runs ``cancel_runs`` or
``retry_runs`` (ACTION) over QUERY in the world at URL, printing ``progress N``
as it goes (flushed, so a test can kill it mid-way) and ``result M D F`` at
the end.
"""

from __future__ import annotations

import sys

import anyio

import worlds
from workflow import cancel_runs, create_hook, retry_runs, workflow


@workflow
async def parked(n: int) -> int:
    """Waits on a hook nobody resumes: open until cancelled."""
    await create_hook()
    return n


async def main(url: str, action: str, query: str) -> None:
    handled = 0

    def tell(n: int) -> None:
        nonlocal handled
        handled += n
        print(f"progress {handled}", flush=True)

    async with worlds.open(url) as world:
        if action == "cancel":
            result = await cancel_runs(query, world=world, on_progress=tell)
        else:
            result = await retry_runs(query, world=world, on_progress=tell)
    print(f"result {result.matched} {result.done} {result.failed}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
