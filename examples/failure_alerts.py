"""A failure handler and a stream closed before its run ends.

    python examples/failure_alerts.py

``charge`` streams its progress, closes the stream once the card is charged
(the reader stops there, while the run goes on) and fails on a declined card;
its ``on_failure`` handler ``alert`` then runs once, as a workflow of its own.
"""

from __future__ import annotations

from datetime import UTC

import anyio

import worlds
from workflow import (
    Worker,
    close_stream,
    get_run,
    now,
    sleep_until,
    start,
    step,
    workflow,
    write_stream,
)
from workflow.errors import RunFailedError
from worlds.semantics import handler_run_id


@step
async def send_alert(text: str) -> str:
    print(f"ALERT: {text}")  # stands for a page to the on-call engineer
    return text


@workflow
async def alert(run_id: str, error: dict[str, str]) -> str:
    return await send_alert(f"{error['workflow']} run {run_id}: {error['message']}")


@step
async def charge_card(card: str) -> str:
    if card.startswith("0000"):
        raise ValueError(f"card {card} declined")
    return f"charged {card}"


@workflow(on_failure=alert)
async def charge(card: str) -> str:
    await write_stream("progress", "charging")
    outcome = await charge_card(card)
    await write_stream("progress", outcome)
    await close_stream("progress")  # readers are done; the run goes on
    await sleep_until(now().replace(microsecond=0).astimezone(UTC))  # a moment past: at once
    return outcome


async def main() -> None:
    async with worlds.open("memory://") as world, Worker(world, [charge]):
        ok = await start(charge, "4242-4242", world=world)
        print([chunk async for chunk in get_run(ok.id, world=world).stream("progress")])
        print(await ok.result(timeout=30))
        declined = await start(charge, "0000-0000", world=world)
        try:
            await declined.result(timeout=30)
        except RunFailedError as exc:
            print(f"failed: {exc}")
        # the handler's run id is derived from the failed run's
        handler = get_run(handler_run_id(declined.id), world=world)
        print(f"handled: {await handler.result(timeout=30)}")


if __name__ == "__main__":
    anyio.run(main)
