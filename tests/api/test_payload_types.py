"""Pydantic models, dataclasses and msgspec Structs come back as the annotated type."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

import msgspec
import pydantic
import pytest

from workflow import Worker, start, step, workflow
from worlds.protocol import World

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
