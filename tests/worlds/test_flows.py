"""The flows' machinery: the synchronous stepper, and who may call the rules.

``run_sync`` must finish a flow over rows that never wait in one step and
refuse one that suspends: a suspension inside SQLite's write transaction
would give the event loop away while the file's write lock is held.
"""

from __future__ import annotations

import asyncio

import pytest

from worlds._flows.stepper import run_sync


async def _never_waits(x: int) -> int:
    async def row() -> int:
        return x + 1

    return await row() * 2


async def _suspends() -> int:
    await asyncio.sleep(0)
    return 1


async def _raises() -> int:
    raise LookupError("unknown run r-1")


def test_a_flow_that_never_waits_runs_to_its_end_in_one_step() -> None:
    assert run_sync(_never_waits(20)) == 42


def test_a_flow_that_suspends_is_refused() -> None:
    with pytest.raises(AssertionError, match="suspended"):
        run_sync(_suspends())


def test_a_flows_exception_propagates_as_it_is() -> None:
    with pytest.raises(LookupError, match="r-1"):
        run_sync(_raises())
