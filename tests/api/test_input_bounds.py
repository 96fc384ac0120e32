"""Issue 24, item 3: values out of range are refused at the call, with the same words
everywhere, and nothing is written; error messages cut oversized inputs."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workflow import Unique, list_runs, prune_runs, start, workflow
from workflow.policies import start_or_debounce
from workflow.views import EventWindow
from worlds.protocol import World
from worlds.quoting import quoted

pytestmark = pytest.mark.anyio

HUNDRED_YEARS = 100 * 365 * 86400
TOO_LONG: list[Any] = [
    math.inf,
    -math.inf,
    math.nan,
    -1,
    HUNDRED_YEARS + 1,
    timedelta(days=101 * 365),
    timedelta.max,
]


@workflow(name="bounded")
async def bounded(x: int) -> int:
    return x


async def nothing_written(world: World) -> bool:
    return len(await list_runs(world=world)) == 0


@pytest.mark.parametrize("delay", TOO_LONG)
async def test_a_delay_past_100_years_is_refused(world: World, delay: Any) -> None:
    with pytest.raises(ValueError, match="delay must be 0 seconds to 100 years"):
        await start(bounded, 1, delay=delay, world=world)
    assert await nothing_written(world)


@pytest.mark.parametrize("ttl", TOO_LONG)
async def test_ttl_has_the_same_bound(world: World, ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl must be 0 seconds to 100 years"):
        await start(bounded, 1, attributes={"k": Unique("v", ttl=ttl)}, world=world)
    assert await nothing_written(world)


@pytest.mark.parametrize("delay", TOO_LONG)
async def test_debounce_has_the_same_bound(world: World, delay: Any) -> None:
    with pytest.raises(ValueError, match="delay must be 0 seconds to 100 years"):
        await start_or_debounce(
            bounded, 1, key="k", value="v", delay=delay, max_delay=60, world=world
        )
    assert await nothing_written(world)


async def test_a_delay_of_100_years_is_taken(world: World) -> None:
    run = await start(bounded, 1, delay=timedelta(days=100 * 365), world=world)
    assert str(await run.status()) == "pending"


@pytest.mark.parametrize("delay", [True, "10", None])
async def test_a_delay_is_seconds_or_a_timedelta(world: World, delay: Any) -> None:
    if delay is None:
        return  # no delay at all
    with pytest.raises(TypeError, match="delay is seconds or a timedelta"):
        await start(bounded, 1, delay=delay, world=world)


@pytest.mark.parametrize("before", ["2030-01-01", "2030-01-01T00:00:00+00:00", 1893456000])
async def test_prune_runs_refuses_what_is_not_a_datetime(world: World, before: Any) -> None:
    with pytest.raises(TypeError, match="closed_before is a timezone-aware datetime"):
        await prune_runs(closed_before=before, world=world)


async def test_prune_runs_takes_a_parsed_iso_time(world: World) -> None:
    moment = datetime.fromisoformat("2030-01-01T00:00:00+00:00")
    assert await prune_runs(closed_before=moment, world=world) == []
    with pytest.raises(ValueError, match="timezone-aware"):
        await prune_runs(closed_before=moment.replace(tzinfo=None), world=world)
    assert moment.tzinfo is UTC or moment.utcoffset() == timedelta(0)


@pytest.mark.parametrize("spec", ["5-1", "200-100"])
def test_an_event_range_the_wrong_way_round_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="wrong way round"):
        EventWindow.parse(spec)


def test_quoted_cuts_an_oversized_input() -> None:
    assert quoted("abc") == "'abc'"
    long = quoted("s" * 5000)
    assert len(long) < 120 and long.endswith("… (5000 characters)")
    assert long.startswith("'sss")
    escaped = quoted("\x1b" * 5000)
    assert len(escaped) < 120
    assert len(quoted(list(range(5000)))) < 140


async def test_errors_cut_an_oversized_stream_name_and_key(world: World) -> None:
    run = await start(bounded, 1, world=world)
    with pytest.raises(ValueError) as caught:
        async for _ in run.stream("s" * 5000):
            pass
    assert len(str(caught.value)) < 300 and "(5000 characters)" in str(caught.value)
    with pytest.raises(ValueError) as caught:
        await start(bounded, 1, attributes={"$" + "k" * 5000: 1}, world=world)
    assert len(str(caught.value)) < 400
    with pytest.raises(ValueError) as caught:
        await start(bounded, 1, attributes={"$k" + "k" * 100: 1}, world=world)
    assert len(str(caught.value)) < 400 and "(102 characters)" in str(caught.value)
    with pytest.raises(ValueError) as caught:
        await start(bounded, 1, attributes={"k": "v\x00" * 3000}, world=world)
    assert len(str(caught.value)) < 400
