"""Workflows answering updates, and a client process sending them.

``python -m tests.apps.updateapp send URL RUN FIRST COUNT IDS`` runs COUNT callers at
once, caller n sending ``add`` with update id ``u-{n % IDS}`` (so callers in other
processes share ids), and prints each reply as a JSON line ``{"id": ..., "reply": ...}``.
``python -m tests.apps.updateapp start URL CART FIRST COUNT IDS`` does the same through
``update_with_start`` keyed by ``cart=CART`` and prints ``{"id", "run", "reply"}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

import worlds
from workflow import get_run, receive_updates, step, workflow
from workflow.policies import update_with_start


@workflow
async def counter(expected: int) -> list[str]:
    """Replies to each update with its position; ends after ``expected`` of them."""
    seen: list[str] = []
    async for update in receive_updates("add"):
        seen.append(update.id)
        await update.reply({"position": len(seen), "item": update.payload})
        if len(seen) == expected:
            break
    return seen


@workflow
async def gatekeeper() -> str:
    """Welcomes each name sent to ``enter``, rejects those starting with "x"; "stop" ends."""
    async for update in receive_updates("enter"):
        if update.payload == "stop":
            await update.reply("stopped")
            break
        if str(update.payload).startswith("x"):
            await update.reject(f"{update.payload} may not enter")
        else:
            await update.reply(f"welcome {update.payload}")
    return "stopped"


@step
async def die_once(marker: str) -> None:
    """SIGKILL this worker process, the first time only (the marker file remembers)."""
    path = Path(marker)
    if not path.exists():
        path.write_text("killed")
        os.kill(os.getpid(), signal.SIGKILL)


@workflow
async def answer_then_die(marker: str) -> str:
    """Replies to the first update, then kills its worker; ends with the next update."""
    updates = receive_updates("ask")
    first = await anext(updates)
    await first.reply(f"answer to {first.payload}")
    await die_once(marker)
    last = await anext(updates)
    await last.reply("bye")
    return "done"


async def _send(url: str, target: str, first: int, count: int, ids: int, start: bool) -> None:
    async with worlds.open(url) as world:
        lines: list[dict[str, Any]] = []

        async def call(n: int) -> None:
            update_id = f"u-{n % ids}"
            if start:
                run, reply = await update_with_start(
                    counter,
                    ids,
                    key="cart",
                    value=target,
                    name="add",
                    payload=f"item-{update_id}",
                    update_id=update_id,
                    world=world,
                )
                lines.append({"id": update_id, "run": run.id, "reply": reply})
            else:
                reply = await get_run(target, world=world).update(
                    "add", f"item-{update_id}", update_id=update_id
                )
                lines.append({"id": update_id, "reply": reply})

        async with anyio.create_task_group() as group:
            for n in range(first, first + count):
                group.start_soon(call, n)
        for line in lines:
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    mode, url, target, first, count, ids = sys.argv[1:7]
    anyio.run(_send, url, target, int(first), int(count), int(ids), mode == "start")
