"""Values and their annotations: typed values come back typed, others plainly (RFC 0011).

Pydantic models, dataclasses and msgspec Structs come back as the annotated
type; an annotation nothing can convert to takes the value as it decodes; a
value that does not validate, or that would change type without an
annotation, is refused where it is recorded.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

import msgspec
import pydantic
import pytest

from workflow import (
    RunFailedError,
    RunStatus,
    UndecodableValueError,
    Worker,
    get_run,
    list_runs,
    start,
    step,
    workflow,
)
from workflow.policies import (
    start_or_cancel_run,
    start_or_debounce,
    start_or_get_run,
    start_or_resume_hook,
    start_with_policy,
)
from workflow.schedules import create_schedule
from worlds.memory import MemoryWorld
from worlds.protocol import World
from worlds.semantics import new_run_id
from worlds.types import CreateRunRequest

pytestmark = pytest.mark.anyio


class Invoice(pydantic.BaseModel):
    number: str
    total: Decimal
    issued: datetime


@dataclass
class Parcel:
    weight_grams: int
    label: str


class Receipt(msgspec.Struct):
    invoice: str
    parcel: str


@step
async def bill(order_id: str, total: Decimal) -> Invoice:
    return Invoice(number=f"inv-{order_id}", total=total, issued=datetime(2026, 1, 2, tzinfo=UTC))


@step
def pack(invoice: Invoice) -> Parcel:
    assert isinstance(invoice, Invoice)  # arguments arrive as the annotated type too
    return Parcel(weight_grams=1200, label=f"parcel for {invoice.number}")


@step
async def confirm(invoice: Invoice, parcel: Parcel) -> Receipt:
    return Receipt(invoice=invoice.number, parcel=parcel.label)


@workflow
async def fulfil(order_id: str, total: Decimal) -> tuple[Invoice, Parcel, Receipt]:
    invoice = await bill(order_id, total)
    assert isinstance(invoice, Invoice), type(invoice)
    parcel = await pack(invoice)
    assert isinstance(parcel, Parcel), type(parcel)
    receipt = await confirm(invoice, parcel)
    assert isinstance(receipt, Receipt), type(receipt)
    return invoice, parcel, receipt


@workflow
async def takes_a_model(invoice: Invoice, parcels: list[Parcel]) -> Invoice:
    assert isinstance(invoice, Invoice)
    assert all(isinstance(p, Parcel) for p in parcels)
    return invoice.model_copy(update={"number": invoice.number + "-copy"})


async def test_step_results_come_back_typed_also_on_replay(world: World) -> None:
    # cache_size=0: every workflow task replays the log, decoding each recorded result again
    async with Worker(world, [fulfil], cache_size=0):
        run = await start(fulfil, "o-1", Decimal("19.99"), world=world)
        invoice, parcel, receipt = await run.result(timeout=20)
    assert invoice == Invoice(
        number="inv-o-1", total=Decimal("19.99"), issued=datetime(2026, 1, 2, tzinfo=UTC)
    )
    assert parcel == Parcel(1200, "parcel for inv-o-1")
    assert receipt == Receipt(invoice="inv-o-1", parcel="parcel for inv-o-1")


async def test_workflow_arguments_and_results_are_typed(world: World) -> None:
    invoice = Invoice(number="i-9", total=Decimal("5"), issued=datetime(2026, 3, 4, tzinfo=UTC))
    async with Worker(world, [takes_a_model]):
        run = await start(takes_a_model, invoice, [Parcel(1, "a")], world=world)
        result = await run.result(timeout=20)
    assert isinstance(result, Invoice)
    assert result.number == "i-9-copy"


async def test_an_unrecordable_argument_names_its_type(world: World) -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        await start(takes_a_model, Opaque(), [], world=world)  # type: ignore[arg-type]


# ---------------------------------------------------------------- issue 33.4: annotations
# nothing can convert to mean "anything": the value is taken as it decodes


class Shipper(Protocol):
    def ship(self) -> str: ...


@step
async def anything(value: object) -> object:
    return {"echo": value}


@step
async def many(values: list[object]) -> list[object]:
    return [*values, "more"]


@step
async def numbers(limit: int) -> Iterable[int]:
    return list(range(limit))


@step
async def shipped(by: Shipper) -> Any:
    return by


@workflow
async def loosely_typed(value: object, shipper: Shipper) -> object:
    echoed = await anything(value)
    return {
        "echoed": echoed,
        "many": await many([1, "two"]),
        "numbers": await numbers(3),
        "shipped": await shipped(shipper),
    }


async def test_annotations_that_convert_to_nothing_decode_as_the_plain_value(
    world: World,
) -> None:
    # cache_size=0: every task replays the log, decoding each recorded step result again
    async with Worker(world, [loosely_typed], cache_size=0):
        run = await start(loosely_typed, {"a": [1]}, "ups", world=world)
        result = await run.result(timeout=20)
    assert result == {
        "echoed": {"echo": {"a": [1]}},
        "many": [1, "two", "more"],
        "numbers": [0, 1, 2],
        "shipped": "ups",
    }
    assert await run.status() is RunStatus.COMPLETED
    assert await get_run(run.id, world=world).result() == result  # read back plainly too


# ---------------------------------------------------------------- issue 33.5: validation


class Customer(msgspec.Struct):
    name: str
    tier: int


@workflow
async def typed_order(invoice: Invoice, parcel: Parcel, customer: Customer, copies: int) -> str:
    return f"{invoice.number}/{parcel.label}/{customer.name}/{copies}"


GOOD = (
    Invoice(number="i-1", total=Decimal("1.00"), issued=datetime(2026, 1, 1, tzinfo=UTC)),
    Parcel(10, "p"),
    Customer("c", 1),
    2,
)
BAD_ARGUMENTS = {
    "invoice": ({"number": "i-1", "total": "not a number", "issued": "yesterday"}, *GOOD[1:]),
    "parcel": (GOOD[0], {"weight_grams": "heavy", "label": "p"}, *GOOD[2:]),
    "customer": (*GOOD[:2], {"name": "c"}, GOOD[3]),
    "copies": (*GOOD[:3], "two"),
}


def starts(world: World) -> dict[str, Callable[[tuple[Any, ...]], Awaitable[Any]]]:
    """Every path that starts a run (or will) with arguments."""
    return {
        "start": lambda args: start(typed_order, *args, world=world),
        "start_with_policy": lambda args: start_with_policy(
            typed_order, *args, key="order", value="o-1", world=world
        ),
        "start_or_get_run": lambda args: start_or_get_run(
            typed_order, *args, key="order", value="o-1", world=world
        ),
        "start_or_cancel_run": lambda args: start_or_cancel_run(
            typed_order, *args, key="order", value="o-1", world=world
        ),
        "start_or_debounce": lambda args: start_or_debounce(
            typed_order, *args, key="order", value="o-1", delay=1, max_delay=2, world=world
        ),
        "start_or_resume_hook": lambda args: start_or_resume_hook(
            typed_order, *args, key="order", value="o-1", token="t-1", world=world
        ),
        "create_schedule": lambda args: create_schedule(
            typed_order, *args, id="s-1", every=3600, world=world
        ),
    }


@pytest.mark.parametrize("path", list(starts(MemoryWorld())))
@pytest.mark.parametrize("argument", list(BAD_ARGUMENTS))
async def test_an_argument_that_does_not_validate_is_refused_at_start(
    world: World, path: str, argument: str
) -> None:
    with pytest.raises(UndecodableValueError, match=f"argument '{argument}' of workflow"):
        await starts(world)[path](BAD_ARGUMENTS[argument])
    assert [r.id for r in await list_runs(world=world)] == []
    assert await world.list_schedules() == []
    assert issubclass(UndecodableValueError, TypeError)
    assert issubclass(UndecodableValueError, ValueError)


@workflow
async def starts_a_bad_child() -> str:
    try:
        await start(typed_order, *BAD_ARGUMENTS["copies"])
    except UndecodableValueError as exc:
        return str(exc)
    return "started"


async def test_a_child_start_with_an_argument_that_does_not_validate_is_refused(
    world: World,
) -> None:
    async with Worker(world, [starts_a_bad_child, typed_order]):
        run = await start(starts_a_bad_child, world=world)
        message = await run.result(timeout=20)
    assert "argument 'copies' of workflow 'typed_order'" in message
    assert [r.id for r in await list_runs(world=world)] == [run.id]  # no child was created


async def test_a_stored_argument_that_no_longer_validates_fails_the_run(world: World) -> None:
    # As if typed_order's annotations changed after the run was created: its stored
    # arguments are what an older version accepted.
    stored = msgspec.msgpack.encode([[{"number": "i-1"}, {}, {}, "two"], {}])
    request = CreateRunRequest(run_id=new_run_id(), workflow=typed_order.name, args=stored)
    await world.create_run(request)
    async with Worker(world, [typed_order]):
        with pytest.raises(RunFailedError) as failed:
            await get_run(request.run_id, world=world).result(timeout=20)
    assert failed.value.error_type == "UndecodableValueError"
    assert "argument 'invoice'" in str(failed.value)
    assert "no longer validates as Invoice" in str(failed.value)


# ---------------------------------------------------------------- issue 24.6: values that
# would change type without an annotation are refused; annotated ones keep their type


class Colour(enum.Enum):
    RED = "red"


@workflow
async def untyped(value):  # type: ignore[no-untyped-def]  # no annotation, on purpose
    return "ran"


CHANGING = {
    "tuple": ((1, 2), "a tuple", "list"),
    "set": ({1, 2}, "a set", "list"),
    "Decimal": (Decimal("1.5"), "a Decimal", "str"),
    "UUID": (uuid.UUID(int=1), "a UUID", "str"),
    "Enum": (Colour.RED, "an Enum", "str"),
    "naive datetime": (datetime(2026, 1, 1), "a naive datetime", "str"),
    "dataclass": (Parcel(1, "p"), "a dataclass", "dict"),
    "nested": ({"items": [(1, 2)]}, "a tuple", "list"),
}


@pytest.mark.parametrize("kind", list(CHANGING))
async def test_an_unannotated_value_that_would_change_type_is_refused(
    world: World, kind: str
) -> None:
    value, what, becomes = CHANGING[kind]
    with pytest.raises(TypeError, match="argument 'value' of workflow 'untyped'") as refused:
        await start(untyped, value, world=world)
    assert what in str(refused.value)
    assert f"comes back as a {becomes} unless annotated" in str(refused.value)
    assert [r.id for r in await list_runs(world=world)] == []


@step
async def make_pair():  # type: ignore[no-untyped-def]  # no annotation, on purpose
    return (1, 2)


@workflow
async def returns_an_unannotated_tuple():  # type: ignore[no-untyped-def]
    return await make_pair()


async def test_an_unannotated_result_that_would_change_type_fails_its_step(
    world: World,
) -> None:
    async with Worker(world, [returns_an_unannotated_tuple]):
        run = await start(returns_an_unannotated_tuple, world=world)
        with pytest.raises(RunFailedError, match="the result of step 'make_pair' holds a tuple"):
            await run.result(timeout=20)


Kept = tuple[tuple[int, str], set[int], Decimal, uuid.UUID, Colour, datetime, Parcel]


@step
async def keep(values: Kept) -> Kept:
    return values


@workflow
async def keeps_types(values: Kept) -> Kept:
    kept = await keep(values)
    assert kept == values
    return kept


async def test_annotated_values_keep_their_type(world: World) -> None:
    values = (
        (1, "a"),
        {1, 2},
        Decimal("1.5"),
        uuid.UUID(int=7),
        Colour.RED,
        datetime(2026, 1, 1, 12, 0),
        Parcel(3, "p"),
    )
    async with Worker(world, [keeps_types], cache_size=0):
        run = await start(keeps_types, values, world=world)
        result = await run.result(timeout=20)
    assert result == values
    assert [type(v) for v in result] == [type(v) for v in values]
    assert result[5].tzinfo is None
