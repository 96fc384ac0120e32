"""``RateLimited`` pairs and ``rate_limit()`` through the public API, on every world."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import anyio
import pytest

from workflow import (
    AttributeConflictError,
    RateLimited,
    RateLimitExceededError,
    RunStatus,
    Worker,
    now,
    rate_limit,
    start,
    workflow,
)
from worlds.protocol import World
from worlds.types import EventKind, RateTokenRequested, RunCreated, RunStarted

pytestmark = pytest.mark.anyio


@workflow
async def call_api(n: int) -> datetime:
    """Returns when its body first ran (the time of its first workflow task)."""
    return now()


@workflow
async def metered(calls: int) -> list[str]:
    """Takes ``calls`` tokens of customer=c-9 (2 per 0.4 s) and returns their times."""
    times = []
    for _ in range(calls):
        await rate_limit("customer", "c-9", limit=2, per=0.4)
        times.append(now().isoformat())
    return times


def _most_in_a_window(times: list[datetime], per: float) -> int:
    """The most of ``times`` any half-open window ``(t - per, t]`` holds."""
    ordered = sorted(times)
    span = timedelta(seconds=per)
    return (
        max(sum(1 for other in ordered if at - span < other <= at) for at in ordered)
        if ordered
        else 0
    )


def _started(run_events: Sequence[EventKind]) -> datetime:
    """When a worker first ran the body: its ``RunStarted``."""
    (at,) = [event.at for event in run_events if isinstance(event, RunStarted)]
    return at


async def _admitted(run_events: Sequence[EventKind]) -> datetime:
    """When a run was admitted: its ``RunCreated.start_at`` (a token in the future)
    or its creation."""
    created = run_events[0]
    assert isinstance(created, RunCreated)
    return created.start_at or created.at


async def test_queued_starts_never_overrun_the_window(world: World) -> None:
    async with Worker(world, [call_api], concurrency=20):
        runs = [
            await start(
                call_api, n, attributes={"customer": RateLimited("c-1", 3, per=0.5)}, world=world
            )
            for n in range(9)
        ]
        with anyio.fail_after(60):
            for run in runs:
                await run.result()
    admitted = [await _admitted(await run.events()) for run in runs]
    started = [_started(await run.events()) for run in runs]
    assert _most_in_a_window(admitted, 0.5) <= 3
    # admitted in arrival order, and no body ran before its admission
    assert admitted == sorted(admitted)
    assert all(body >= at for body, at in zip(started, admitted, strict=True))
    # nine starts at three per half second span at least a second
    assert (admitted[-1] - admitted[0]).total_seconds() >= 1.0
    assert (await runs[0].attributes())["customer"] == "c-1"


async def test_a_queued_run_is_pending_until_its_token(world: World) -> None:
    rate = RateLimited("c-2", 1, per=timedelta(hours=1))
    first = await start(call_api, 0, attributes={"customer": rate}, world=world)
    second = await start(call_api, 1, attributes={"customer": rate}, world=world)
    created = (await second.events())[0]
    assert isinstance(created, RunCreated) and created.start_at is not None
    assert created.start_at - created.at >= timedelta(minutes=59)
    async with Worker(world, [call_api]):
        with anyio.fail_after(30):
            await first.result()
        assert await second.status() is RunStatus.PENDING


async def test_other_values_are_not_limited(world: World) -> None:
    rate = RateLimited("c-3", 1, per=3600)
    await start(call_api, 0, attributes={"customer": rate}, world=world)
    other = await start(
        call_api, 1, attributes={"customer": RateLimited("c-4", 1, per=3600)}, world=world
    )
    created = (await other.events())[0]
    assert isinstance(created, RunCreated) and created.start_at is None


async def test_on_full_fail_raises_with_a_truthful_retry_after(world: World) -> None:
    rate = RateLimited("c-5", 2, per=1.0, on_full="fail")
    first = await start(call_api, 0, attributes={"customer": rate}, world=world)
    await start(call_api, 1, attributes={"customer": rate}, world=world)
    with pytest.raises(RateLimitExceededError) as refused:
        await start(call_api, 2, attributes={"customer": rate}, world=world)
    error = refused.value
    assert isinstance(error, AttributeConflictError)
    assert error.key == "customer" and error.value == "c-5" and error.limit == 2
    assert error.existing_run.id == first.id
    assert 0 < error.retry_after <= 1.0
    # nothing was created: only the two runs hold the pair
    holding = [r async for r in _runs_of(world, "c-5")]
    assert len(holding) == 2
    await anyio.sleep(error.retry_after + 0.05)
    admitted = await start(call_api, 3, attributes={"customer": rate}, world=world)
    created = (await admitted.events())[0]
    assert isinstance(created, RunCreated) and created.start_at is None


async def _runs_of(world: World, value: str):  # type: ignore[no-untyped-def]
    from workflow import list_runs

    for run in await list_runs(attributes={"customer": value}, world=world):
        yield run


async def test_a_pair_has_one_rate_at_a_time(world: World) -> None:
    await start(call_api, 0, attributes={"customer": RateLimited("c-6", 2, per=60)}, world=world)
    with pytest.raises(ValueError, match="one rate at a time"):
        await start(
            call_api, 1, attributes={"customer": RateLimited("c-6", 3, per=60)}, world=world
        )


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        (("v", 0), {"per": 1}, ValueError),
        (("v", -1), {"per": 1}, ValueError),
        (("v", 1.5), {"per": 1}, TypeError),
        (("v", True), {"per": 1}, TypeError),
        (("v", 1), {"per": 0}, ValueError),
        (("v", 1), {"per": -2}, ValueError),
        (("v", 1), {"per": timedelta(0)}, ValueError),
        (("v", 1), {"per": float("nan")}, ValueError),
        (("v", 1), {"per": "1s"}, TypeError),
        (("v", 1), {"per": 1, "on_full": "drop"}, ValueError),
    ],
)
async def test_bad_rates_are_refused_at_the_boundary(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        RateLimited(*args, **kwargs)  # type: ignore[arg-type]


async def test_rate_limit_in_workflows_paces_calls_and_replays_without_new_tokens(
    world: World,
) -> None:
    async with Worker(world, [metered], concurrency=8):
        runs = [await start(metered, 3, world=world) for _ in range(2)]
        with anyio.fail_after(60):
            results = [await run.result() for run in runs]
    times = [datetime.fromisoformat(at) for result in results for at in result]
    tokens = [
        event
        for run in runs
        for event in await run.events()
        if isinstance(event, RateTokenRequested)
    ]
    assert len(tokens) == 6  # one per call: replays took none
    granted = [t.token_at for t in tokens if t.token_at is not None]
    assert len(granted) == 6 and _most_in_a_window(granted, 0.4) <= 2
    assert all(body >= token for body, token in zip(sorted(times), sorted(granted), strict=True))


async def test_rate_limit_refuses_bad_input_in_the_workflow(world: World) -> None:
    @workflow(name="bad_rate")
    async def bad_rate() -> None:
        await rate_limit("customer", "c-9", limit=0, per=1)

    async with Worker(world, [bad_rate]):
        run = await start(bad_rate, world=world)
        with anyio.fail_after(30), pytest.raises(Exception, match="limit"):
            await run.result()
