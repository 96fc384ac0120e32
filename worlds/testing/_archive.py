"""Conformance of a world's full dump and load: ``export_rows`` and ``import_rows``."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from worlds import archive
from worlds.archive import encode_rows
from worlds.memory import MemoryWorld
from worlds.protocol import World
from worlds.testing._base import (
    STEP,
    WF,
    ConformanceBase,
    create_run,
    lease_all,
    new_run_id,
    run_with_steps,
    soon,
)
from worlds.types import (
    AttributeValue,
    CommitRequest,
    CreateRunRequest,
    HookDelivery,
    Limit,
    Rate,
    RunCompleted,
    ScheduleRecord,
    StartPolicy,
    UpdateDelivery,
    WorkerInfo,
    utcnow,
)

__all__ = ["ArchiveConformance", "fill_world"]


async def fill_world(world: World) -> dict[str, str]:
    """Give ``world`` a row of every kind a dump holds; the ids of the runs made.

    A running run holding a unique pair and a leased step item, a stream; a
    slot holder and a waiter; a rate-limited start; a run holding an unbound
    hook token with its payload and resume id; a tombstone; a released pair; a
    schedule; a setting; a pending update of the running run; a key limit with
    weights whose second value was served from the key's line (its share); a
    build's deployment.
    """
    await world.setting("archive-conformance", "1")
    running, _, _ = await run_with_steps(world, steps=1, lease_steps=True)
    assert await world.append_stream(running.id, "out", [b"\x00one", b"two"]) == 0
    update = UpdateDelivery(name="rename", update_id="u-1", payload=b"\x01new")
    assert (await world.send_update(running.id, update)).state == "pending"
    claimed = await create_run(world, attributes={"order": "o-1", "n": 7}, unique=["order"])
    limited = {"lane": Limit(limit=1)}
    holder, waiter = await _two_limited(world, {"lane": "a"}, limited, (b"h", b"w"))
    rated = CreateRunRequest(
        run_id=new_run_id(),
        workflow=WF,
        args=b"",
        attributes={"api": "x"},
        rates={"api": Rate(limit=5, per=60.0)},
    )
    assert (await world.create_run(rated)).run is not None
    hooked = CreateRunRequest(
        run_id=new_run_id(),
        workflow=WF,
        args=b"",
        attributes={"cart": "c-1"},
        unique=frozenset({"cart"}),
        policy=StartPolicy(key="cart", conflict="use_existing"),
    )
    delivery = HookDelivery(token="cart-c-1", payload=b"\xffpayload", resume_id="r-1")
    assert (await world.start_or_resume_hook(hooked, delivery)).created
    released = await create_run(world, attributes={"ticket": "t-1"}, unique=["ticket"])
    await world.commit(
        CommitRequest(run_id=released.id, worker_id="w", events=(RunCompleted(result=b"r"),))
    )
    assert await world.prune_runs(utcnow() + timedelta(seconds=1), release_claims=True) == [
        released.id
    ]
    pruned = await create_run(world, attributes={"ticket": "t-2"}, unique=["ticket"])
    await world.commit(
        CommitRequest(run_id=pruned.id, worker_id="w", events=(RunCompleted(result=b"r"),))
    )
    assert await world.prune_runs(utcnow() + timedelta(seconds=1)) == [pruned.id]
    await world.set_key_limit("tenant", 1, {"gold": 3.0})
    tenant = {"tenant": Limit(limit=5)}
    first, second = await _two_limited(world, {"tenant": "gold"}, tenant, (b"", b""))
    await world.commit(
        CommitRequest(run_id=first.run_id, worker_id="w", events=(RunCompleted(result=b""),))
    )
    build = WorkerInfo(
        id=f"archive-{new_run_id()}",
        host="archive-host",
        pid=1,
        build_id="build-1",
        workflows={WF: "run", STEP: "latest"},
    )
    await world.register_worker(build)
    record = ScheduleRecord(
        id="nightly", workflow=WF, spec=b"\x01spec", next_fire_at=soon(3600), wake_at=soon(3600)
    )
    await world.create_schedule(record)
    return {
        "running": running.id,
        "claimed": claimed.id,
        "holder": holder.run_id,
        "waiter": waiter.run_id,
        "rated": rated.run_id,
        "hooked": hooked.run_id,
        "pruned": pruned.id,
        "served": second.run_id,
    }


async def dump(world: World) -> list[archive.DumpRow]:
    """Every row ``world`` exports."""
    return [row async for row in world.export_rows()]


def same_rows(got: list[archive.DumpRow], wanted: list[archive.DumpRow]) -> bool:
    """Whether two dumps hold the same rows, byte for byte, in any order (a world
    orders its ids by its own collation)."""
    return sorted(encode_rows([r]) for r in got) == sorted(encode_rows([r]) for r in wanted)


def kinds(rows: list[archive.DumpRow]) -> Counter[str]:
    """How many rows of each kind."""
    return Counter(type(row).__name__ for row in rows)


class ArchiveConformance(ConformanceBase):
    """A world dumps every row it holds and loads such rows as they are, refusing
    what it already holds."""

    @pytest.mark.anyio
    async def test_a_dump_holds_every_row_as_the_world_reads_it(self, world: World) -> None:
        ids = await fill_world(world)
        rows = await dump(world)
        assert isinstance(rows[0], archive.DumpedSetting)
        found = kinds(rows)
        for kind in archive.ROW_ORDER:  # every kind, settings first
            assert found[kind.__name__] >= 1, f"no {kind.__name__} in {found}"
        runs = {row.record.id: row for row in rows if isinstance(row, archive.DumpedRun)}
        assert ids["pruned"] not in runs and set(runs) >= {ids["running"], ids["hooked"]}
        for run_id, row in runs.items():
            # as read, but payloads as stored: a wrapper's reads may decode them
            record = await world.get_run(run_id)
            assert record is not None
            assert (row.record.id, row.record.status, row.record.last_seq) == (
                record.id,
                record.status,
                record.last_seq,
            )
            assert row.record.attributes == record.attributes
            events = await world.read_events(run_id)
            assert [(e.seq, e.at, type(e)) for e in row.events] == [
                (e.seq, e.at, type(e)) for e in events
            ]
        tombstones = [
            r.claim for r in rows if isinstance(r, archive.DumpedClaim) and r.claim.pruned_status
        ]
        assert [(c.key, c.value, c.run_id) for c in tombstones] == [
            ("ticket", "t-2", ids["pruned"])
        ]
        held = [
            r.claim
            for r in rows
            if isinstance(r, archive.DumpedClaim) and not r.claim.pruned_status
        ]
        assert await world.find_claim("order", "o-1") in held
        slots = [r.slot for r in rows if isinstance(r, archive.DumpedSlot) and r.slot.key == "lane"]
        assert slots == await world.list_slots("lane", "a")
        work = [r for r in rows if isinstance(r, archive.DumpedWork) and r.name == STEP]
        assert len(work) == 1 and work[0].run_id == ids["running"]
        # the dump of the runs named holds their rows only
        only = [row async for row in world.export_rows([ids["hooked"], "no-such-run"])]
        assert {type(row) for row in only} <= {
            archive.DumpedRun,
            archive.DumpedClaim,
            archive.DumpedHook,
            archive.DumpedResume,
            archive.DumpedWork,
        }
        assert [r.record.id for r in only if isinstance(r, archive.DumpedRun)] == [ids["hooked"]]

    @pytest.mark.anyio
    async def test_rows_load_as_they_are_and_dump_the_same(self, world: World) -> None:
        """Rows made by the reference world load into this one and dump back byte for
        byte; the loaded world then works on them: the claims refuse, the work leases,
        a new waiter queues after the loaded one."""
        reference = MemoryWorld()
        ids = await fill_world(reference)
        rows = await dump(reference)
        await world.import_rows(rows)
        assert same_rows(await dump(world), rows)
        conflict = await world.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow=WF,
                args=b"",
                attributes={"order": "o-1"},
                unique=frozenset({"order"}),
            )
        )
        assert conflict.conflict is not None and conflict.conflict.holder_run_id == ids["claimed"]
        tombstone = await world.find_claim("ticket", "t-2")
        assert tombstone is not None and tombstone.run_id == ids["pruned"]
        leased = {item.run_id for item in await lease_all(world, {WF, STEP})}
        assert {ids["running"], ids["claimed"], ids["holder"], ids["hooked"]} <= leased
        assert ids["waiter"] not in leased  # still in line for the slot
        late = CreateRunRequest(
            run_id=new_run_id(),
            workflow=WF,
            args=b"",
            attributes={"lane": "a"},
            limits={"lane": Limit(limit=1)},
        )
        assert (await world.create_run(late)).run is not None
        line = [s.run_id for s in await world.list_slots("lane", "a")]
        assert line == [ids["holder"], ids["waiter"], late.run_id]
        assert await world.resume_hook("cart-c-1", b"again", resume_id="r-1") == ids["hooked"]
        assert await world.get_schedule("nightly") == await reference.get_schedule("nightly")
        # the update id is remembered (sent again: its one outcome, nothing appended)
        running = await world.get_run(ids["running"])
        assert running is not None
        again = UpdateDelivery(name="rename", update_id="u-1", payload=b"\x01new")
        assert (await world.send_update(ids["running"], again)).state == "pending"
        after = await world.get_run(ids["running"])
        assert after is not None and after.last_seq == running.last_seq
        assert await world.get_key_limit("tenant") == await reference.get_key_limit("tenant")
        deployed = await world.list_deployments()
        assert [(d.build_id, sorted(d.workflows)) for d in deployed] == [
            ("build-1", sorted([WF, STEP]))
        ]
        wanted = await reference.list_deployments()
        assert deployed[0].registered_at == wanted[0].registered_at

    @pytest.mark.anyio
    async def test_rows_it_holds_are_refused_and_nothing_written(self, world: World) -> None:
        await fill_world(world)
        rows = await dump(world)
        runs = [row for row in rows if isinstance(row, archive.DumpedRun)]
        with pytest.raises(ValueError, match="already in this world"):
            await world.import_rows(rows)
        orphan = [row for row in rows if isinstance(row, archive.DumpedWork)][:1]
        with pytest.raises(ValueError, match="lack"):
            await world.import_rows(orphan)
        with pytest.raises(ValueError, match="setting"):
            await world.import_rows([archive.DumpedSetting("archive-conformance", "2")])
        for kind in (archive.DumpedKeyLimit, archive.DumpedKeyShare, archive.DumpedDeployment):
            held = [row for row in rows if isinstance(row, kind)]
            with pytest.raises(ValueError, match="already in this world"):
                await world.import_rows(held)
        assert same_rows(await dump(world), rows)
        assert runs


async def _two_limited(
    world: World,
    attributes: dict[str, AttributeValue],
    limits: dict[str, Limit],
    args: tuple[bytes, bytes],
) -> tuple[CreateRunRequest, CreateRunRequest]:
    """Create two runs under ``limits`` (the first holds the slot, the second waits)."""
    made = tuple(
        CreateRunRequest(
            run_id=new_run_id(), workflow=WF, args=a, attributes=attributes, limits=limits
        )
        for a in args
    )
    for request in made:
        assert (await world.create_run(request)).run is not None
    return made[0], made[1]
