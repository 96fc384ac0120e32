"""Conformance: a world stores the whole range of values the SDK accepts (RFC 0003).

The SDK checks every attribute value before a world sees it
(``workflow._attributes``): ints are signed 64-bit, floats finite, strings
valid Unicode without NUL and at most 256 UTF-8 bytes, datetimes aware and
within the years 1-9999 in UTC. A world must store every value inside that
range and give it back equal: in a run's attributes, in the log, in a claim
and through a search. Payloads (arguments, results, hook payloads, errors)
are opaque bytes to a world, and every byte value must survive.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from worlds.protocol import World
from worlds.query import AttrRef, Compare, RunQuery
from worlds.testing._base import WF, WORKER, ConformanceBase, create_run, lease_one
from worlds.types import (
    AttributeSet,
    AttributeValue,
    CommitRequest,
    ErrorInfo,
    HookCreated,
    HookReceived,
    RunCompleted,
    RunCreated,
    RunFailed,
    StepCompleted,
    StepCreated,
)

__all__ = ["BOUNDARY_VALUES", "ValueConformance"]

MIN_INT = -(2**63)
MAX_INT = 2**63 - 1

BOUNDARY_VALUES: dict[str, AttributeValue] = {
    "int-min": MIN_INT,
    "int-max": MAX_INT,
    "int-zero": 0,
    "float-max": 1.7976931348623157e308,
    "float-lowest": -1.7976931348623157e308,
    "float-tiny": 5e-324,
    "float-fraction": 0.1,
    "str-empty": "",
    "str-256-ascii": "x" * 256,
    "str-256-bytes-of-4-byte-characters": "\U0001f600" * 64,
    "str-highest-code-point": "\U0010ffff",
    "str-controls": "\x01\t\n\r\x1b\x7f",
    "str-quotes-and-wildcards": "'\"\\%_*?[]`",
    "str-non-ascii": "клиент-é-日本",
    "bool-true": True,
    "bool-false": False,
    "none": None,
    "datetime-first": datetime(1, 1, 1, tzinfo=UTC),
    "datetime-last": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    "datetime-offset": datetime(2024, 2, 29, 23, 30, 0, 1, tzinfo=timezone(timedelta(hours=14))),
}
"""Values at the edges of what the SDK accepts, by an attribute key naming each."""

_LONG_KEY = "k" * 256
_ODD_KEY = "ключ \U0001f600 `x` 'y'"
ALL_BYTES = bytes(range(256))
"""Every byte value: a payload is opaque bytes (MessagePack holds NULs)."""


def _equal(stored: object, expected: object) -> bool:
    """Equal and of the same type (``True`` is not ``1``); datetimes as instants."""
    return type(stored) is type(expected) and stored == expected


class ValueConformance(ConformanceBase):
    """The whole allowed range of attribute values, and every byte of a payload."""

    @pytest.mark.anyio
    async def test_boundary_values_round_trip_in_a_new_run(self, world: World) -> None:
        """``create_run`` stores every boundary value; the record gives each back."""
        values = {**BOUNDARY_VALUES, _LONG_KEY: "long key", _ODD_KEY: "odd key"}
        run = await create_run(world, attributes=values)
        stored = await world.get_run(run.id)
        assert stored is not None
        for key, expected in values.items():
            assert key in stored.attributes, f"attribute {key!r} was lost"
            got = stored.attributes[key]
            assert _equal(got, expected), f"attribute {key!r}: stored {expected!r}, got {got!r}"

    @pytest.mark.anyio
    async def test_boundary_values_are_claimed_and_found(self, world: World) -> None:
        """Every boundary value can be a unique claim, found again by ``find_claim``."""
        run = await create_run(world, attributes=BOUNDARY_VALUES, unique=BOUNDARY_VALUES)
        for key, value in BOUNDARY_VALUES.items():
            claim = await world.find_claim(key, value)
            assert claim is not None, f"the claim on {key}={value!r} was not found"
            assert claim.run_id == run.id

    @pytest.mark.anyio
    async def test_boundary_values_are_searchable(self, world: World) -> None:
        """An equality filter on each boundary value finds the run holding it."""
        run = await create_run(world, attributes=BOUNDARY_VALUES)
        await create_run(world, attributes={key: "other" for key in BOUNDARY_VALUES})
        for key, value in BOUNDARY_VALUES.items():
            page = await world.list_runs(RunQuery(attributes={key: value}))
            assert [r.id for r in page.runs] == [run.id], f"searching {key}={value!r}"

    @pytest.mark.anyio
    async def test_the_int_extremes_order_against_each_other(self, world: World) -> None:
        """Filters compare 64-bit extremes exactly, as Python does."""
        low = await create_run(world, attributes={"n": MIN_INT})
        high = await create_run(world, attributes={"n": MAX_INT})
        above = await world.list_runs(RunQuery(where=Compare(AttrRef("n"), ">", MIN_INT)))
        assert [r.id for r in above.runs] == [high.id]
        below = await world.list_runs(RunQuery(where=Compare(AttrRef("n"), "<", MAX_INT)))
        assert [r.id for r in below.runs] == [low.id]

    @pytest.mark.anyio
    async def test_boundary_values_round_trip_through_a_commit(self, world: World) -> None:
        """``AttributeSet`` events store every boundary value, in the log and the record."""
        run = await create_run(world)
        item = await lease_one(world, WF)
        events = tuple(
            AttributeSet(key=key, value=value, unique=True)
            for key, value in BOUNDARY_VALUES.items()
        )
        result = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, events=events, ack=False)
        )
        assert result.ok, result
        logged = {
            e.key: e.value for e in await world.read_events(run.id) if isinstance(e, AttributeSet)
        }
        stored = await world.get_run(run.id)
        assert stored is not None
        for key, expected in BOUNDARY_VALUES.items():
            assert _equal(logged.get(key, ...), expected), f"log: {key!r} -> {logged.get(key)!r}"
            got = stored.attributes.get(key, ...)
            assert _equal(got, expected), f"record: {key!r} -> {got!r}"
            claim = await world.find_claim(key, expected)
            assert claim is not None and claim.run_id == run.id, f"claim on {key!r}"

    @pytest.mark.anyio
    async def test_payloads_keep_every_byte(self, world: World) -> None:
        """Arguments, step and run results, errors and hook payloads are opaque bytes."""
        run = await create_run(world, args=ALL_BYTES)
        item = await lease_one(world, WF)
        text = "a\x00b \U0010ffff " + "".join(map(chr, range(1, 32)))
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(
                    StepCreated(step=1, name="s", args=ALL_BYTES),
                    StepCompleted(step=1, attempt=1, result=ALL_BYTES),
                    HookCreated(hook=1, token="tok-bytes", attributes={"k": "v"}),
                ),
                ack=False,
            )
        )
        assert result.ok, result
        assert await world.resume_hook("tok-bytes", ALL_BYTES, "resume-\u00e9") == run.id
        failed = await create_run(world)
        error = ErrorInfo(type="ValueError", message=text, traceback=text)
        closing = await world.commit(
            CommitRequest(run_id=failed.id, worker_id=WORKER, events=(RunFailed(error=error),))
        )
        assert closing.ok, closing
        done = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=ALL_BYTES),))
        )
        assert done.ok, done
        events = await world.read_events(run.id)
        assert next(e for e in events if isinstance(e, RunCreated)).args == ALL_BYTES
        assert next(e for e in events if isinstance(e, StepCreated)).args == ALL_BYTES
        assert next(e for e in events if isinstance(e, StepCompleted)).result == ALL_BYTES
        received = next(e for e in events if isinstance(e, HookReceived))
        assert (received.payload, received.resume_id) == (ALL_BYTES, "resume-\u00e9")
        completed = await world.get_run(run.id)
        assert completed is not None and completed.result == ALL_BYTES
        failed_record = await world.get_run(failed.id)
        assert failed_record is not None and failed_record.error == error
