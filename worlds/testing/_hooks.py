"""Conformance: hook tokens, deliveries, deduplication by resume id, disposal."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import (
    WF,
    WORKER,
    ConformanceBase,
    WorldFactory,
    assert_dense,
    create_run,
    lease_one,
    new_run_id,
    open_worlds,
)
from worlds.types import (
    CommitRequest,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunStatus,
    utcnow,
)

__all__ = ["HookConformance"]


async def _create_hook(world: World, run_id: str, token: str, number: int = 1) -> EventKind:
    result = await world.commit(
        CommitRequest(
            run_id=run_id,
            worker_id=WORKER,
            events=(HookCreated(hook=number, token=token, attributes={"doc": "nda"}),),
        )
    )
    assert result.ok, result
    return result.events[0]


async def _continue(world: World, run_id: str, hooks_read: dict[str, int]) -> str:
    next_id = new_run_id()
    continued = RunContinued(next_run_id=next_id, args=b"\x90", hooks_read=hooks_read)
    result = await world.commit(CommitRequest(run_id=run_id, worker_id=WORKER, events=(continued,)))
    assert result.ok and result.status is RunStatus.CONTINUED, result
    return next_id


def _payloads(events: list[EventKind]) -> list[tuple[int, str, bytes, str | None]]:
    return [
        (e.hook, e.token, e.payload, e.resume_id) for e in events if isinstance(e, HookReceived)
    ]


class HookConformance(ConformanceBase):
    """Hooks: one open run per token, payloads appended once per resume id."""

    @pytest.mark.anyio
    async def test_continue_as_new_moves_tokens_and_unread_payloads(self, world: World) -> None:
        """Payloads the body did not read move, in order, with their token to the next run.

        The token stays live across the continuation (a delivery between the two
        runs is accepted by the successor), and the successor binds it to the
        hook it creates with it. Nothing accepted is lost or delivered twice.
        """
        run = await create_run(world)
        await _create_hook(world, run.id, "inbox-1")
        await _create_hook(world, run.id, "inbox-2", number=2)
        for n in range(5):
            assert await world.resume_hook("inbox-1", bytes([n]), f"r-{n}") == run.id
        assert await world.resume_hook("inbox-2", b"b0") == run.id
        next_id = await _continue(world, run.id, {"inbox-1": 2})
        events = await world.read_events(next_id)
        assert_dense(events)
        assert isinstance(events[0], RunCreated)
        assert _payloads(events) == [
            (0, "inbox-1", b"\x02", "r-2"),
            (0, "inbox-1", b"\x03", "r-3"),
            (0, "inbox-1", b"\x04", "r-4"),
            (0, "inbox-2", b"b0", None),
        ]
        hooks = await world.list_hooks()
        assert sorted((h.token, h.run_id, h.hook) for h in hooks) == [
            ("inbox-1", next_id, 0),
            ("inbox-2", next_id, 0),
        ]
        # a retried delivery answers with the run the payload now lives in
        assert await world.resume_hook("inbox-1", b"\x04", "r-4") == next_id
        assert await world.resume_hook("inbox-1", b"\x00", "r-0") == next_id
        assert await world.resume_hook("inbox-1", b"\x05", "r-5") == next_id
        bound = await _create_hook(world, next_id, "inbox-1", number=1)
        assert isinstance(bound, HookCreated)
        assert await world.resume_hook("inbox-1", b"\x06") == next_id
        assert _payloads(await world.read_events(next_id))[-2:] == [
            (0, "inbox-1", b"\x05", "r-5"),
            (1, "", b"\x06", None),
        ]
        assert {(h.token, h.hook) for h in await world.list_hooks(next_id)} == {
            ("inbox-1", 1),
            ("inbox-2", 0),
        }
        # a token bound once is not bound again, and other runs still conflict
        again = await _create_hook(world, next_id, "inbox-1", number=3)
        assert isinstance(again, HookConflict) and again.holder_run_id == next_id
        other = await create_run(world)
        taken = await _create_hook(world, other.id, "inbox-2")
        assert isinstance(taken, HookConflict) and taken.holder_run_id == next_id
        assert await world.list_hooks(run.id) == []
        # a second continuation moves a token read past its carried payloads
        third = await _continue(world, next_id, {"inbox-1": 4})
        assert _payloads(await world.read_events(third)) == [
            (0, "inbox-2", b"b0", None),
            (0, "inbox-1", b"\x06", None),
        ]

    @pytest.mark.anyio
    async def test_a_token_is_held_by_one_open_run(self, world: World) -> None:
        """A second run asking for a live token gets a ``HookConflict`` naming the holder."""
        holder = await create_run(world)
        other = await create_run(world)
        created = await _create_hook(world, holder.id, "tok-1")
        assert isinstance(created, HookCreated)
        conflict = await _create_hook(world, other.id, "tok-1", number=3)
        assert isinstance(conflict, HookConflict)
        assert (conflict.hook, conflict.token, conflict.holder_run_id) == (3, "tok-1", holder.id)
        (live,) = await world.list_hooks()
        assert (live.token, live.run_id, live.hook) == ("tok-1", holder.id, 1)
        assert live.attributes == {"doc": "nda"}
        assert await world.list_hooks(other.id) == []

    @pytest.mark.anyio
    async def test_deliveries_racing_a_continuation_are_each_kept_once(
        self, world: World, world_factory: WorldFactory
    ) -> None:
        """Twenty deliveries from five world objects race ``RunContinued``: every one is
        accepted, and the payloads the body did not read plus those delivered late
        are in the successor's log exactly once, the carried ones first, in order."""
        run = await create_run(world)
        await _create_hook(world, run.id, "race")
        for n in range(3):
            assert await world.resume_hook("race", b"early-%d" % n) == run.id
        answers: dict[bytes, str | None] = {}
        next_id = new_run_id()
        async with open_worlds(world_factory, 5) as worlds:

            async def deliver(n: int) -> None:
                payload = b"late-%d" % n
                answers[payload] = await worlds[n % 5].resume_hook("race", payload, f"r-{n}")

            async def continue_run() -> None:
                continued = RunContinued(next_run_id=next_id, args=b"", hooks_read={"race": 2})
                request = CommitRequest(run_id=run.id, worker_id=WORKER, events=(continued,))
                assert (await worlds[0].commit(request)).ok

            async with anyio.create_task_group() as group:
                for n in range(10):
                    group.start_soon(deliver, n)
                group.start_soon(continue_run)
                for n in range(10, 20):
                    group.start_soon(deliver, n)
        old = [p for _, _, p, _ in _payloads(await world.read_events(run.id))]
        new = [p for _, _, p, _ in _payloads(await world.read_events(next_id))]
        assert old[:3] == [b"early-0", b"early-1", b"early-2"]
        assert new[: len(old) - 2] == old[2:], "the unread payloads did not move first, in order"
        accepted = [b"early-0", b"early-1", b"early-2", *answers]
        assert sorted(old[:2] + new) == sorted(accepted), "a payload was lost or doubled"
        for payload, answered in answers.items():
            assert answered in (run.id, next_id), f"{payload!r} was refused"
            assert (payload in old) is (answered == run.id), f"{payload!r} went elsewhere"
        assert (await world.get_run(next_id)) is not None
        assert [(h.token, h.run_id, h.hook) for h in await world.list_hooks()] == [
            ("race", next_id, 0)
        ]

    @pytest.mark.anyio
    async def test_resume_appends_once_per_resume_id_and_wakes_the_run(self, world: World) -> None:
        """Each delivery is a ``HookReceived`` plus a workflow wake-up, in one step."""
        run = await create_run(world)
        await lease_one(world, WF)  # the run's first workflow item is in flight
        await _create_hook(world, run.id, "tok-2")
        assert await world.resume_hook("tok-2", b"\x01", "r-1") == run.id
        assert await world.resume_hook("tok-2", b"\x01", "r-1") == run.id
        assert await world.resume_hook("tok-2", b"\x02") == run.id
        events = await world.read_events(run.id)
        assert_dense(events)
        received = [e for e in events if isinstance(e, HookReceived)]
        assert [(e.hook, e.payload, e.resume_id) for e in received] == [
            (1, b"\x01", "r-1"),
            (1, b"\x02", None),
        ]
        assert await world.resume_hook("no-such-token", b"") is None

    @pytest.mark.anyio
    async def test_closing_a_run_disposes_its_hooks(self, world: World) -> None:
        """After the run closes its token resumes nothing and may be taken again."""
        run = await create_run(world)
        await _create_hook(world, run.id, "tok-3")
        await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        )
        assert await world.list_hooks() == []
        assert await world.resume_hook("tok-3", b"late") is None
        again = await create_run(world)
        assert isinstance(await _create_hook(world, again.id, "tok-3"), HookCreated)

    @pytest.mark.anyio
    async def test_a_resume_id_answers_the_same_after_the_run_closed(self, world: World) -> None:
        """A retried delivery is idempotent even once the run has closed, until pruned."""
        run = await create_run(world)
        await _create_hook(world, run.id, "tok-4")
        assert await world.resume_hook("tok-4", b"\x01", "r-9") == run.id
        await world.cancel_run(run.id, None)
        assert await world.resume_hook("tok-4", b"\x01", "r-9") == run.id
        assert await world.resume_hook("tok-4", b"\x01", "r-10") is None
        received = [e for e in await world.read_events(run.id) if isinstance(e, HookReceived)]
        assert len(received) == 1
        assert await world.prune_runs(utcnow() + timedelta(seconds=1)) == [run.id]
        assert await world.resume_hook("tok-4", b"\x01", "r-9") is None
