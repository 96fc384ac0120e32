"""Attributes: validation, unique claims at start, in workflows, in steps, and search."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from workflow import (
    AttributeConflictError,
    RunStatus,
    Unique,
    Worker,
    find_run,
    get_attribute,
    get_step_metadata,
    list_attributes,
    list_runs,
    set_attribute,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import AttributeConflict, AttributeSet

pytestmark = pytest.mark.anyio


@workflow
async def idle(tag: str = "") -> str:
    return tag


# ----------------------------------------------------------------- at start


async def test_start_claims_unique_pairs_atomically(world: World) -> None:
    first = await start(idle, attributes={"customer": "c-9", "order": Unique("o-1")}, world=world)
    assert await first.attributes() == {"customer": "c-9", "order": "o-1"}
    with pytest.raises(AttributeConflictError) as info:
        await start(idle, attributes={"customer": "c-7", "order": Unique("o-1")}, world=world)
    error = info.value
    assert (error.key, error.value, error.existing_run_id) == ("order", "o-1", first.id)
    assert error.existing_run == first
    assert await error.existing_run.status() is RunStatus.PENDING  # type: ignore[attr-defined]
    # nothing was created by the refused start
    assert [r.id for r in await list_runs(world=world)] == [first.id]
    assert [r.id for r in await list_runs(attributes={"customer": "c-7"}, world=world)] == []
    found = await find_run("order", "o-1", world=world)
    assert found == first
    # a plain (non-unique) pair may repeat
    await start(idle, attributes={"customer": "c-9"}, world=world)
    assert len(await list_runs(attributes={"customer": "c-9"}, world=world)) == 2


async def test_values_of_different_types_are_different_claims(world: World) -> None:
    for value in ["1", 1, 1.5, True, None, datetime(2026, 1, 1, tzinfo=UTC)]:
        await start(idle, attributes={"k": Unique(value)}, world=world)
    with pytest.raises(AttributeConflictError):
        await start(idle, attributes={"k": Unique(True)}, world=world)
    assert await find_run("k", 2, world=world) is None
    assert (await find_run("k", 1.5, world=world)) is not None


async def test_idempotency_key_is_start_or_get(world: World) -> None:
    first = await start(idle, "a", idempotency_key="req-42", world=world)
    again = await start(idle, "b", idempotency_key="req-42", world=world)
    assert again == first
    assert await first.attributes() == {"$idempotency_key": "req-42"}
    assert len(await list_runs(world=world)) == 1


async def test_name_is_unique_and_checked(world: World) -> None:
    run = await start(idle, attributes={"$name": "nightly-report:2026-11-29"}, world=world)
    assert await find_run("$name", "nightly-report:2026-11-29", world=world) == run
    with pytest.raises(AttributeConflictError):
        await start(idle, attributes={"$name": "nightly-report:2026-11-29"}, world=world)
    with pytest.raises(ValueError, match=r"\$name"):
        await start(idle, attributes={"$name": "has space"}, world=world)
    with pytest.raises(ValueError, match=r"\$name"):
        await start(idle, attributes={"$name": "x" * 192}, world=world)


BAD_ATTRIBUTES: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"": "v"}, ValueError),
    ({"k" * 257: "v"}, ValueError),
    ({"k": "é" * 129}, ValueError),  # 258 UTF-8 bytes
    ({"k": {"nested": 1}}, TypeError),
    ({"k": [1, 2]}, TypeError),
    ({"k": float("nan")}, ValueError),
    ({"k": datetime(2026, 1, 1)}, ValueError),  # naive
    ({"$owner": "me"}, ValueError),
    ({"$idempotency_key": 5}, TypeError),
    ({f"k{i}": i for i in range(65)}, ValueError),
    ({1: "v"}, TypeError),  # type: ignore[dict-item]
]


@pytest.mark.parametrize(("attributes", "error"), BAD_ATTRIBUTES)
async def test_bad_attributes_are_refused_before_writing(
    world: World, attributes: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        await start(idle, attributes=attributes, world=world)
    assert len(await list_runs(world=world)) == 0


async def test_limits_are_inclusive(world: World) -> None:
    attributes: dict[str, Any] = {f"k{i}": i for i in range(63)}
    attributes["k" * 256] = "é" * 128  # 256 bytes exactly
    run = await start(idle, attributes=attributes, world=world)
    assert len(await run.attributes()) == 64


# ----------------------------------------------------------------- in workflows


@workflow
async def claims_order(order: str) -> dict[str, Any]:
    before = await get_attribute("order")
    await set_attribute("stage", "claiming")
    try:
        await set_attribute("order", order, unique=True)
        outcome = "claimed"
    except AttributeConflictError as exc:
        outcome = f"held by {exc.existing_run_id}"
    await set_attribute("attempts", lambda current: (current or 0) + 1)  # type: ignore[operator]
    await asyncio.sleep(0.2)  # a durable timer: the worker may restart here
    return {
        "before": before,
        "outcome": outcome,
        "after": await get_attribute("order"),
        "all": await list_attributes(),
    }


async def test_workflow_claims_and_conflicts_are_recorded(world: World) -> None:
    async with Worker(world, [claims_order]):
        winner = await start(claims_order, "o-7", world=world)
        first = await winner.result(timeout=10)
        loser = await start(claims_order, "o-7", world=world)
        second = await loser.result(timeout=10)
    assert first == {
        "before": None,
        "outcome": "claimed",
        "after": "o-7",
        "all": {"stage": "claiming", "order": "o-7", "attempts": 1},
    }
    assert second["outcome"] == f"held by {winner.id}"
    assert second["after"] is None
    assert await find_run("order", "o-7", world=world) == winner
    conflicts = [e for e in await loser.events() if isinstance(e, AttributeConflict)]
    assert [(c.key, c.holder_run_id) for c in conflicts] == [("order", winner.id)]
    claims = [e for e in await winner.events() if isinstance(e, AttributeSet) and e.unique]
    assert [(c.key, c.generation) for c in claims] == [("order", 1)]
    assert await loser.attributes() == {"stage": "claiming", "attempts": 1}


async def test_conflict_replays_identically_after_restart(make_world: Callable[[], World]) -> None:
    world = make_world()
    async with world:
        holder = await start(idle, attributes={"order": Unique("o-8")}, world=world)
        async with Worker(world, [claims_order], cache_size=0):
            run = await start(claims_order, "o-8", world=world)
            with anyio.fail_after(5):
                while not any(isinstance(e, AttributeConflict) for e in await run.events()):
                    await anyio.sleep(0.02)
        # the conflict is in the log; a new worker replays it from there
        async with Worker(world, [claims_order]):
            result = await run.result(timeout=10)
        assert sum(isinstance(e, AttributeConflict) for e in await run.events()) == 1
    assert result["outcome"] == f"held by {holder.id}"
    assert result["before"] is None


@workflow
async def bad_set(kind: str) -> str:
    try:
        if kind == "nested":
            await set_attribute("k", {"a": 1})  # type: ignore[arg-type]
        else:
            await set_attribute("$secret", "x")
    except (TypeError, ValueError) as exc:
        return type(exc).__name__
    return "accepted"


async def test_bad_attributes_in_workflows_raise_at_the_call(world: World) -> None:
    async with Worker(world, [bad_set]):
        nested = await start(bad_set, "nested", world=world)
        reserved = await start(bad_set, "reserved", world=world)
        assert await nested.result(timeout=10) == "TypeError"
        assert await reserved.result(timeout=10) == "ValueError"
    assert await nested.attributes() == {}


# ----------------------------------------------------------------- in steps

step_outcomes: list[tuple[int, str]] = []


@step(max_retries=2, retry_delay=0.0)
async def claims_in_step(value: str, fail_first: bool) -> int:
    attempt = get_step_metadata().attempt
    try:
        await set_attribute("email-sent", value, unique=True)
        step_outcomes.append((attempt, "claimed"))
    except AttributeConflictError as exc:
        step_outcomes.append((attempt, f"conflict {exc.existing_run_id}"))
        return -1
    if fail_first and attempt == 1:
        raise ConnectionError("flaky")
    return attempt


@workflow
async def step_claims(value: str, fail_first: bool) -> list[int]:
    first = await claims_in_step(value, fail_first)
    second = await claims_in_step(value, False)  # another step of the same run
    return [first, second]


async def test_step_claims_are_scoped_to_the_attempt(world: World) -> None:
    step_outcomes.clear()
    async with Worker(world, [step_claims]):
        run = await start(step_claims, "thanks:o-1", True, world=world)
        assert await run.result(timeout=10) == [2, -1]
    assert step_outcomes == [(1, "claimed"), (2, "claimed"), (1, f"conflict {run.id}")]
    holder = await find_run("email-sent", "thanks:o-1", world=world)
    assert holder == run
    step_sets = [e for e in await run.events() if isinstance(e, AttributeSet)]
    assert [(e.step, e.attempt) for e in step_sets] == [(1, 1), (1, 2)]
    assert await run.attributes() == {}  # step attributes live on the step, not the run


# ----------------------------------------------------------------- search


@workflow
async def never_run() -> None:
    """Registered with no worker in these tests, so its runs stay pending."""


async def test_list_runs_filters_and_paginates(world: World) -> None:
    runs = [
        await start(
            idle if i < 3 else never_run,
            attributes={"tenant": "t-1" if i % 2 else "t-2", "i": i},
            world=world,
        )
        for i in range(9)
    ]
    async with Worker(world, [idle]):
        for run in runs[:3]:
            await run.result(timeout=10)
    tenant1 = [r.id for r in reversed(runs) if r.id in {runs[i].id for i in range(1, 9, 2)}]
    seen: list[str] = []
    cursor = None
    while True:
        page = await list_runs(attributes={"tenant": "t-1"}, limit=3, cursor=cursor, world=world)
        seen += [r.id for r in page]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == tenant1
    done = await list_runs(status=RunStatus.COMPLETED, world=world)
    assert {r.id for r in done} == {r.id for r in runs[:3]}
    both = await list_runs(attributes={"tenant": "t-1", "i": 3}, world=world)
    assert [r.id for r in both] == [runs[3].id]
    assert len(await list_runs(workflow=idle, world=world)) == 3
    assert len(await list_runs(workflow=never_run, status="pending", world=world)) == 6
    assert len(await list_runs(workflow="other", world=world)) == 0
    later = datetime.now(UTC) + timedelta(seconds=1)
    assert len(await list_runs(created_after=later, world=world)) == 0
    assert len(await list_runs(created_before=later, world=world)) == 9
    with pytest.raises(ValueError):
        await list_runs(cursor="%%%not-a-cursor", world=world)


async def test_concurrent_unique_starts_make_exactly_one_run(
    make_world: Callable[[], World],
) -> None:
    handles = [make_world() for _ in range(5)]
    outcomes: list[str] = []

    async def contend(i: int) -> None:
        try:
            run = await start(idle, attributes={"order": Unique("o-50")}, world=handles[i % 5])
            outcomes.append(f"run {run.id}")
        except AttributeConflictError as exc:
            outcomes.append(f"conflict {exc.existing_run_id}")

    try:
        async with anyio.create_task_group() as group:
            for i in range(50):
                group.start_soon(contend, i)
    finally:
        for handle in handles:
            await handle.close()
    created = [o for o in outcomes if o.startswith("run ")]
    assert len(created) == 1
    winner = created[0].split()[1]
    assert sorted(outcomes) == sorted([f"run {winner}"] + [f"conflict {winner}"] * 49)
