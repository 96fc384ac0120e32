"""Conformance of the one clock of a world shared by many hosts.

A world that processes on several hosts share (PostgreSQL) decides lease
expiry and due times by one clock, the database's, so a worker whose clock
runs fast neither takes over a live lease nor fires a timer early, and the
times it writes are the shared clock's. A world that lives on one host
(SQLite) or in one process (memory) has one clock by construction and does
not take this part of the kit.

A world proves the rule with a ``skewed_world_factory`` fixture: a callable
``(seconds) -> World`` giving a new, unopened world object over the same
storage as ``world_factory`` whose process clock runs ``seconds`` ahead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeAlias

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import (
    TIMER,
    WF,
    WORKER,
    ConformanceBase,
    create_run,
    lease_all,
    lease_one,
    poll_lease,
    run_with_steps,
    soon,
)
from worlds.types import CommitRequest, NewWorkItem, WaitCreated, utcnow

__all__ = ["ClockConformance", "SkewedWorldFactory"]

SkewedWorldFactory: TypeAlias = Callable[[float], World]
"""What the ``skewed_world_factory`` fixture returns: a world object over the same
storage whose process clock runs the given seconds ahead."""

SKEW = 10.0
"""Seconds the skewed world's clock runs ahead."""
LEASE = 2.0
"""Seconds of the leases the live worker holds and renews."""
SLACK = 0.1
"""Seconds the world's estimate of its clock may differ from the test process's clock."""


class ClockConformance(ConformanceBase):
    """A worker's clock decides nothing: the shared world's clock does."""

    @pytest.mark.anyio
    async def test_a_fast_clock_takes_over_no_live_lease(
        self, world: World, skewed_world_factory: SkewedWorldFactory
    ) -> None:
        """A live, renewed lease stays its holder's until the world's clock says it expired."""
        await create_run(world)
        held = await lease_one(world, WF, lease_seconds=LEASE)
        async with skewed_world_factory(SKEW) as skewed:
            assert await lease_all(skewed, {WF}, worker="fast") == [], (
                "a worker whose clock runs fast took over a live lease"
            )
            await anyio.sleep(LEASE / 2)
            renewed_at = utcnow()
            assert await world.renew_leases(WORKER, [held], LEASE) == [True]
            await anyio.sleep(LEASE * 0.75)
            assert await lease_all(skewed, {WF}, worker="fast") == [], (
                "a worker whose clock runs fast took over a live, renewed lease"
            )
            taken = await poll_lease(skewed, {WF}, worker="fast", within=LEASE + 30)
            assert utcnow() >= renewed_at + timedelta(seconds=LEASE - SLACK), (
                "the lease was taken over before it expired"
            )
            assert [item.id for item in taken] == [held.id]

    @pytest.mark.anyio
    async def test_a_fast_clock_fires_no_timer_early(
        self, world: World, skewed_world_factory: SkewedWorldFactory
    ) -> None:
        """A timer becomes leasable when the world's clock reaches it, whoever leases."""
        run, item, _ = await run_with_steps(world, steps=0, ack=False)
        until = soon(LEASE)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(WaitCreated(wait=1, until=until),),
                schedule=(NewWorkItem(kind="timer", name=TIMER, number=1, available_at=until),),
            )
        )
        assert result.ok
        async with skewed_world_factory(SKEW) as skewed:
            assert await lease_all(skewed, {TIMER}, worker="fast") == [], (
                "a worker whose clock runs fast fired a timer early"
            )
            fired = await poll_lease(skewed, {TIMER}, worker="fast", within=LEASE + 30)
            assert utcnow() >= until - timedelta(seconds=SLACK), "a timer fired before it was due"
            assert [timer.run_id for timer in fired] == [run.id]

    @pytest.mark.anyio
    async def test_a_fast_clock_writes_the_worlds_time(
        self, world: World, skewed_world_factory: SkewedWorldFactory
    ) -> None:
        """Times a skewed world object writes are the world's clock, not its own."""
        async with skewed_world_factory(SKEW) as skewed:
            before = utcnow()
            run = await create_run(skewed)
            after = utcnow()
            events = await world.read_events(run.id)
            slack = timedelta(seconds=1)
            for moment in (run.created_at, events[0].at):
                assert before - slack <= moment <= after + slack, (
                    f"a worker whose clock runs {SKEW} s fast wrote {moment}, "
                    f"not the world's time (between {before} and {after})"
                )
            leased = await lease_one(skewed, WF, worker="fast", lease_seconds=LEASE)
            deadline = leased.lease_expires_at
            assert deadline is not None
            assert deadline <= utcnow() + timedelta(seconds=LEASE) + slack, (
                f"a lease taken by a worker whose clock runs fast expires at {deadline}"
            )
