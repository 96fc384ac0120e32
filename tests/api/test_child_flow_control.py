"""Child runs take flow control like any start: Limited, RateLimited, delay= and priority=."""

from __future__ import annotations

import itertools

import pytest

from workflow import (
    AttributeConflictError,
    Limited,
    RateLimited,
    RateLimitExceededError,
    Worker,
    create_hook,
    replay,
    start,
    workflow,
)
from workflow.policies import start_or_resume_hook
from worlds.protocol import World
from worlds.types import ChildConflict, ChildStarted, RunCompleted, RunCreated, RunStarted

pytestmark = pytest.mark.anyio


@workflow
async def child_job(n: int) -> int:
    return n


@workflow
async def limited_parent(count: int) -> list[int]:
    kids = [
        await start(child_job, n, attributes={"tenant": Limited("acme", 1)}, priority=3)
        for n in range(count)
    ]
    return [await kid.result() for kid in kids]


@workflow
async def delayed_parent() -> int:
    kid = await start(child_job, 7, delay=0.3)
    return await kid.result()


@workflow
async def holds_on() -> None:
    await create_hook()  # never resumed: it keeps its slot while the parent goes on


@workflow
async def refused_parent() -> list[str]:
    seen = []
    hold_it = await start(holds_on, attributes={"tenant": Limited("solo", 1)})
    try:
        await start(child_job, 1, attributes={"tenant": Limited("solo", 1, on_full="fail")})
    except AttributeConflictError as exc:
        seen.append(f"limit {exc.limit} held by {exc.existing_run.id == hold_it.id}")
    await start(child_job, 2, attributes={"customer": RateLimited("c-9", 1, per=3600)})
    try:
        await start(
            child_job, 3, attributes={"customer": RateLimited("c-9", 1, per=3600, on_full="fail")}
        )
    except RateLimitExceededError as exc:
        seen.append(f"rate {exc.limit}/{exc.per:g} retry {0 < exc.retry_after <= 3600}")
    return seen


async def _created(world: World, run_id: str) -> RunCreated:
    created = (await world.read_events(run_id))[0]
    assert isinstance(created, RunCreated)
    return created


async def test_limited_children_run_one_at_a_time_with_their_priority(world: World) -> None:
    async with Worker(world, [limited_parent, child_job]):
        run = await start(limited_parent, 4, world=world)
        assert await run.result(timeout=30) == [0, 1, 2, 3]
    kids = [e.run_id for e in await run.events() if isinstance(e, ChildStarted)]
    spans = []
    for kid in kids:
        created = await _created(world, kid)
        assert created.limits == {"tenant": 1} and created.priority == 3
        log = await world.read_events(kid)
        began = next(e.at for e in log if isinstance(e, RunStarted))
        ended = next(e.at for e in log if isinstance(e, RunCompleted))
        spans.append((began, ended))
    spans.sort()
    # one slot: each child began after the one before it had completed
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))
    await replay(limited_parent, await run.events(), run_id=run.id)


async def test_a_delayed_child_starts_at_its_start_time(world: World) -> None:
    async with Worker(world, [delayed_parent, child_job]):
        run = await start(delayed_parent, world=world)
        assert await run.result(timeout=30) == 7
    (kid,) = [e.run_id for e in await run.events() if isinstance(e, ChildStarted)]
    created = await _created(world, kid)
    assert created.start_at is not None and created.start_at > created.at
    began = next(e.at for e in await world.read_events(kid) if isinstance(e, RunStarted))
    assert began >= created.start_at


async def test_full_children_raise_in_the_parent_as_start_would(world: World) -> None:
    async with Worker(world, [refused_parent, child_job, holds_on]):
        run = await start(refused_parent, world=world)
        assert await run.result(timeout=30) == ["limit 1 held by True", "rate 1/3600 retry True"]
    conflicts = [e for e in await run.events() if isinstance(e, ChildConflict)]
    assert [(c.key, c.limit, c.retry_after is not None) for c in conflicts] == [
        ("tenant", 1, False),
        ("customer", 1, True),
    ]
    await replay(refused_parent, await run.events(), run_id=run.id)


@workflow
async def hooked() -> object:
    return await create_hook(token="order-1")


async def test_start_or_resume_hook_delays_the_run_it_starts(world: World) -> None:
    run = await start_or_resume_hook(
        hooked, key="order", value="o-1", token="order-1", payload="hi", delay=0.3, world=world
    )
    created = await _created(world, run.id)
    assert created.start_at is not None
    again = await start_or_resume_hook(
        hooked, key="order", value="o-1", token="order-1", payload="ho", delay=0.3, world=world
    )
    assert again.id == run.id  # delivered to the open run, which still waits for its start
    async with Worker(world, [hooked]):
        assert await run.result(timeout=30) == "hi"
    began = next(e.at for e in await world.read_events(run.id) if isinstance(e, RunStarted))
    assert began >= created.start_at
    with pytest.raises(ValueError):
        await start_or_resume_hook(
            hooked, key="order", value="o-2", token="order-2", delay=-1, world=world
        )
