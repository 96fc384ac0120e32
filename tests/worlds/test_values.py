"""One rule set for attribute values, checked in the SDK before any world sees them.

Issue 10, item 3: values that passed validation but a world could not store
left runs retrying forever. Each is now refused at the call, on every world;
the conformance kit (``worlds.testing._values``) proves that every world
stores the whole range that remains.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from workflow import (
    RunFailedError,
    RunStatus,
    Unique,
    Worker,
    find_run,
    list_runs,
    resume_hook,
    set_attribute,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.query import AttrRef, Compare, Expr, FieldRef, In, StartsWith
from worlds.types import StepFailed

pytestmark = pytest.mark.anyio

UNSTORABLE: list[tuple[object, type[Exception]]] = [
    (-(2**63) - 1, ValueError),
    (2**63, ValueError),
    (2**64, ValueError),
    ("a\x00b", ValueError),
    ("\ud800", ValueError),
    ("ok \udfff", ValueError),
    (float("inf"), ValueError),
    (float("-inf"), ValueError),
    (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))), ValueError),  # year 0 in UTC
    (datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-2))), ValueError),
]
BAD_KEYS = ["a\x00b", "\ud800", "k\udc80"]


class Color(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


@workflow
async def idle() -> None:
    """Never run: these runs stay pending."""


@pytest.mark.parametrize(("value", "error"), UNSTORABLE)
async def test_start_refuses_values_no_world_can_store(
    world: World, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="attribute 'v'"):
        await start(idle, attributes={"v": value}, world=world)
    with pytest.raises(error, match="attribute 'v'"):
        await start(idle, attributes={"v": Unique(value)}, world=world)
    assert len(await list_runs(world=world)) == 0


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_start_refuses_keys_no_world_can_store(world: World, key: str) -> None:
    with pytest.raises(ValueError, match="attribute key"):
        await start(idle, attributes={key: 1}, world=world)
    assert len(await list_runs(world=world)) == 0


@pytest.mark.parametrize(("value", "error"), UNSTORABLE)
async def test_filters_refuse_values_no_world_can_store(
    world: World, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        await list_runs(attributes={"v": value}, world=world)  # type: ignore[dict-item]
    with pytest.raises(error):
        await find_run("v", value, world=world)  # type: ignore[arg-type]


async def test_the_boundaries_are_accepted_and_round_trip(world: World) -> None:
    edges: dict[str, Any] = {
        "low": -(2**63),
        "high": 2**63 - 1,
        "big": 1.7976931348623157e308,
        "text": "\U0001f600" * 64,
        "first": datetime(1, 1, 1, tzinfo=UTC),
        "last": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    }
    run = await start(idle, attributes={k: Unique(v) for k, v in edges.items()}, world=world)
    assert await run.attributes() == edges
    for key, value in edges.items():
        assert await find_run(key, value, world=world) == run
        assert [r.id for r in await list_runs(attributes={key: value}, world=world)] == [run.id]


async def test_subclasses_are_stored_as_their_plain_value(world: World) -> None:
    run = await start(
        idle,
        attributes={"color": Unique(Color.RED), "size": Size.LARGE, "zero": -0.0},
        world=world,
    )
    stored = await run.attributes()
    assert stored == {"color": "red", "size": 3, "zero": 0.0}
    assert [type(v) for v in stored.values()] == [str, int, float]
    assert str(stored["zero"]) == "0.0"
    assert await find_run("color", "red", world=world) == run
    assert await find_run("color", Color.RED, world=world) == run
    assert [r.id for r in await list_runs(attributes={"size": 3}, world=world)] == [run.id]


@workflow
async def sets_unstorable(kind: str) -> str:
    value: Any = {"low": -(2**63) - 1, "high": 2**64, "nul": "a\x00b", "lone": "\ud800"}[kind]
    try:
        await set_attribute("v", value)
    except ValueError as exc:
        return f"refused: {exc}"
    return "accepted"


@step
async def step_sets_unstorable(kind: str) -> str:
    value: Any = {"low": -(2**63) - 1, "high": 2**64, "nul": "a\x00b", "lone": "\ud800"}[kind]
    try:
        await set_attribute("v", value)
    except ValueError as exc:
        return f"refused: {exc}"
    return "accepted"


@workflow
async def step_sets(kind: str) -> str:
    return await step_sets_unstorable(kind)


@pytest.mark.parametrize("kind", ["low", "high", "nul", "lone"])
async def test_set_attribute_refuses_at_the_call_and_the_run_finishes(
    world: World, kind: str
) -> None:
    """Before the fix, SQLite/PostgreSQL runs stayed pending, retrying each lease."""
    async with Worker(world, [sets_unstorable, step_sets]):
        in_workflow = await start(sets_unstorable, kind, world=world)
        in_step = await start(step_sets, kind, world=world)
        assert (await in_workflow.result(timeout=15)).startswith("refused: attribute 'v'")
        assert (await in_step.result(timeout=15)).startswith("refused: attribute 'v'")
    assert await in_workflow.attributes() == {}


@workflow
async def many_step_attributes() -> str:
    return await sets_65()


@step
async def sets_65() -> str:
    try:
        for i in range(65):
            await set_attribute(f"k{i}", i)
    except ValueError as exc:
        return str(exc)
    return "accepted"


async def test_a_steps_attribute_limit_names_the_step(world: World) -> None:
    async with Worker(world, [many_step_attributes]):
        run = await start(many_step_attributes, world=world)
        message = await run.result(timeout=30)
    assert message == "a step attempt has at most 64 attributes, this one would have 65"


@pytest.mark.parametrize("payload", ["\ud800", ["ok", {"k": "\udcff"}]])
async def test_payloads_with_lone_surrogates_are_refused_at_the_call(
    world: World, payload: object
) -> None:
    with pytest.raises(TypeError, match=r"arguments cannot be recorded: .*lone surrogate"):
        await start(idle, payload, world=world)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="hook payload cannot be recorded"):
        await resume_hook("tok-1", payload, world=world)
    assert len(await list_runs(world=world)) == 0


async def test_payloads_with_nul_and_64_bit_ints_are_stored(world: World) -> None:
    @workflow(name="echo-values")
    async def echo(value: Any) -> Any:
        return value

    payload = {"text": "a\x00b", "low": -(2**63), "high": 2**64 - 1, "inf": float("inf")}
    async with Worker(world, [echo]):
        run = await start(echo, payload, world=world)
        assert await run.result(timeout=15) == payload
    with pytest.raises(TypeError, match="arguments cannot be recorded"):
        await start(echo, 2**64, world=world)


async def test_time_filters_must_be_timezone_aware(world: World) -> None:
    naive = datetime(2026, 1, 1)
    for name in ("created_after", "created_before"):
        with pytest.raises(ValueError, match=f"{name} must be timezone-aware"):
            await list_runs(world=world, **{name: naive})  # type: ignore[arg-type]
    assert len(await list_runs(created_after=naive.replace(tzinfo=UTC), world=world)) == 0


@step(max_retries=1, retry_delay=0.0)
async def returns_unstorable(kind: str) -> Any:
    if kind == "raises":
        raise ValueError("bad \ud800 text")
    return {"surrogate": "\ud800", "huge": 2**70}[kind]


@workflow
async def ends_unstorable(kind: str, where: str) -> Any:
    if where == "step":
        return await returns_unstorable(kind)
    if kind == "raises":
        raise ValueError("bad \ud800 text")
    return {"surrogate": "\ud800", "huge": 2**70}[kind]


@pytest.mark.parametrize("where", ["step", "workflow"])
@pytest.mark.parametrize("kind", ["surrogate", "huge", "raises"])
async def test_a_result_or_error_no_world_can_store_fails_the_run_once(
    world: World, kind: str, where: str
) -> None:
    """Before the fix, a lone surrogate in a result or an error message left the run retrying."""
    async with Worker(world, [ends_unstorable]):
        run = await start(ends_unstorable, kind, where, world=world)
        with pytest.raises(RunFailedError) as info:
            await run.result(timeout=30)
    message = info.value.error_message
    if kind == "raises":
        assert "bad \\ud800 text" in message  # the surrogate is kept, escaped
    else:
        assert "cannot be recorded" in message
    if where == "step":
        failed = [e for e in await run.events() if isinstance(e, StepFailed)]
        assert len(failed) == 1  # refused once, not retried


async def test_resume_ids_and_cancel_reasons_no_world_can_store_are_refused(world: World) -> None:
    run = await start(idle, world=world)
    for resume_id in ["a\x00b", "\ud800"]:
        with pytest.raises(ValueError, match="resume_id"):
            await resume_hook("tok-1", 1, resume_id=resume_id, world=world)
    with pytest.raises(TypeError, match="cancel reason cannot be recorded"):
        await run.cancel("why \ud800")
    assert await run.status() is RunStatus.PENDING
    await run.cancel("why \x00 not", grace=None)
    assert await run.status() is RunStatus.CANCELLED


@pytest.mark.parametrize("name", ["a\x00b", "\ud800"])
def test_workflow_and_step_names_must_be_storable(name: str) -> None:
    async def body() -> None:
        return None

    with pytest.raises(ValueError, match="name"):
        workflow(name=name)(body)
    with pytest.raises(ValueError, match="name"):
        step(name=name)(body)


@pytest.mark.parametrize(
    "where",
    [
        Compare(AttrRef("k"), "=", "\ud800"),
        Compare(FieldRef("workflow"), "=", "x\udfff"),
        In(AttrRef("k"), ("ok", "\ud800")),
        StartsWith(AttrRef("k"), "\ud800"),
        Compare(AttrRef("k\ud800"), "=", 1),
    ],
)
async def test_filters_with_lone_surrogates_are_refused(world: World, where: Expr) -> None:
    await start(idle, attributes={"k": "ok"}, world=world)
    with pytest.raises(ValueError, match="lone surrogate"):
        await list_runs(query=where, world=world)
