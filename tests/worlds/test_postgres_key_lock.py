"""PostgreSQL key limits: which starts wait for a limited key's lock.

A start that waits behind runs already waiting at its pair, whose value is in
its key's line, changes nothing at the key, so it takes no key lock
(``key_limits.waits_behind``): it completes while another transaction holds the
key's lock. A start at a pair with nobody waiting needs the key's state and
waits for that lock (seen in ``pg_locks``) until it is released.
"""

from __future__ import annotations

import uuid

import anyio
import asyncpg
import pytest

import worlds
from worlds.postgres import PostgresWorld
from worlds.semantics import new_run_id
from worlds.types import CreateRunRequest, Limit, RunStatus

pytestmark = pytest.mark.anyio

LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtext($1), hashtext('*'))"
WAITING_FOR_KEY = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND classid::bigint = (hashtext($1)::bigint & 4294967295) "
    "AND objid::bigint = (hashtext('*')::bigint & 4294967295)"
)


def _limited(key: str, value: str) -> CreateRunRequest:
    return CreateRunRequest(
        run_id=new_run_id(),
        workflow="keyed",
        args=b"",
        attributes={key: value},
        limits={key: Limit(limit=1)},
    )


async def test_a_start_behind_waiters_takes_no_key_lock(postgres_world_url: str) -> None:
    key = f"tenant-{uuid.uuid4().hex[:8]}"  # advisory locks are the server's, not the schema's
    async with worlds.open(postgres_world_url) as world:
        assert isinstance(world, PostgresWorld)
        await world.set_key_limit(key, 1)
        assert (await world.create_run(_limited(key, "a"))).run is not None  # holds
        first = (await world.create_run(_limited(key, "a"))).run
        assert first is not None and first.status is RunStatus.PENDING  # waits, in line
        conn = await asyncpg.connect(world.dsn)
        try:
            locking = conn.transaction()
            await locking.start()
            await conn.execute(LOCK_KEY, key)
            with anyio.fail_after(60):  # a hang detector: it must not wait for the lock
                behind = (await world.create_run(_limited(key, "a"))).run
            assert behind is not None and behind.status is RunStatus.PENDING
            done = anyio.Event()

            async def start_at_an_empty_pair() -> None:
                assert (await world.create_run(_limited(key, "b"))).run is not None
                done.set()

            async with anyio.create_task_group() as group:
                group.start_soon(start_at_an_empty_pair)
                with anyio.fail_after(60):
                    while not await conn.fetchval(WAITING_FOR_KEY, key):
                        await anyio.sleep(0.02)
                assert not done.is_set()
                await locking.rollback()  # the key's lock goes with the transaction
                with anyio.fail_after(60):
                    await done.wait()
        finally:
            await conn.close()
        assert [s.holding for s in await world.list_slots(key, "a")] == [True, False, False]
        assert [s.holding for s in await world.list_slots(key, "b")] == [False]
