"""``sleep_until``: a durable timer to an aware moment (issue 28, item 3).

In the spirit of Inngest's ``step.sleep_until`` tests and Vercel's ``sleep`` with
a ``Date``: the run waits until the moment, a past moment goes on at once but is
still in the log, a naive datetime is refused, and replay agrees with the log.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import anyio
import pytest

from workflow import (
    NotInWorkflowError,
    RunStatus,
    Worker,
    now,
    replay,
    sleep_until,
    start,
    workflow,
)
from workflow.testing import TestEnvironment
from worlds.protocol import World
from worlds.types import WaitCompleted, WaitCreated

pytestmark = pytest.mark.anyio


@workflow
async def wake_at(offset: float) -> list[str]:
    started = now()
    target = (started + timedelta(seconds=offset)).astimezone(timezone(timedelta(hours=5)))
    await sleep_until(target)
    woke = now()
    return [target.isoformat(), started.isoformat(), woke.isoformat()]


@workflow
async def naive_refused() -> str:
    try:
        await sleep_until(datetime(2030, 1, 1))
    except TypeError as exc:
        return str(exc)
    return "accepted"


async def test_sleep_until_waits_for_the_moment_and_records_it(world: World) -> None:
    async with Worker(world, [wake_at]):
        run = await start(wake_at, 0.4, world=world)
        target, started, woke = await run.result(timeout=60)
    due = datetime.fromisoformat(target)
    assert datetime.fromisoformat(woke) >= due > datetime.fromisoformat(started)
    events = await run.events()
    waits = [e for e in events if isinstance(e, WaitCreated)]
    assert [w.until for w in waits] == [due.astimezone(UTC)]
    assert any(isinstance(e, WaitCompleted) for e in events)
    await replay(wake_at, events, run_id=run.id)


async def test_a_past_moment_returns_at_once_and_is_still_recorded(world: World) -> None:
    async with Worker(world, [wake_at]):
        run = await start(wake_at, -3600.0, world=world)
        target, started, _ = await run.result(timeout=60)
    assert datetime.fromisoformat(target) < datetime.fromisoformat(started)
    events = await run.events()
    waits = [e for e in events if isinstance(e, WaitCreated)]
    # the timer is due when the body asked (its now()), not an hour ago
    assert [w.until for w in waits] == [datetime.fromisoformat(started)]
    await replay(wake_at, events, run_id=run.id)


async def test_a_naive_datetime_is_refused_with_a_type_error(world: World) -> None:
    async with Worker(world, [naive_refused]):
        run = await start(naive_refused, world=world)
        message = await run.result(timeout=60)
    assert "aware datetime" in message and "naive" in message
    assert not [e for e in await run.events() if isinstance(e, WaitCreated)]


async def test_sleep_until_outside_a_workflow() -> None:
    with pytest.raises(TypeError, match="naive"):
        await sleep_until(datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="takes a datetime"):
        await sleep_until(5)  # type: ignore[arg-type]
    with pytest.raises(NotInWorkflowError):
        await sleep_until(datetime(2030, 1, 1, tzinfo=UTC))


@workflow
async def until_new_year() -> str:
    await sleep_until(datetime(2099, 1, 1, tzinfo=UTC))
    return now().isoformat()


async def test_the_testing_kit_skips_to_the_moment() -> None:
    async with TestEnvironment(workflows=[until_new_year], skip_time=False) as env:
        run = await env.start(until_new_year)
        await anyio.sleep(0.3)
        assert await run.status() is RunStatus.RUNNING  # waiting for 2099, not skipping
        await env.advance(datetime(2099, 1, 1, tzinfo=UTC) - env.now())
        with anyio.fail_after(10):
            woke = datetime.fromisoformat(await run.result())
    assert woke >= datetime(2099, 1, 1, tzinfo=UTC)
