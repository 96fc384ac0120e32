"""The worker under database faults: finished steps are not re-run, failures are
logged with manners, a poison run fails instead of looping, cancellation reaches
in-flight steps quickly, and a lost lease's result is visibly discarded."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.ballast import RESULT_SIZE, free, full_while_bulky_runs
from tests.apps.bulky import bulky_flow
from workflow import (
    RunFailedError,
    RunStatus,
    Worker,
    get_step_metadata,
    start,
    step,
    workflow,
)
from workflow.schedules import create_schedule
from worlds.protocol import World
from worlds.types import StepCompleted, StepFailed, WorkerInfo, WorkItem
from worlds.wrapper import WorldWrapper

pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------- journal


def journal(path: str, line: str) -> None:
    with open(path, "a") as out:
        out.write(line + "\n")


def starts(path: Path) -> list[str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.removeprefix("start ") for line in lines if line.startswith("start ")]


@step
async def gated(path: str, gate: str, i: int) -> int:
    journal(path, f"start {get_step_metadata().step_id}")
    while not Path(gate).exists():
        await anyio.sleep(0.02)
    journal(path, f"end {get_step_metadata().step_id}")
    return i


@workflow
async def gated_flow(path: str, gate: str, n: int) -> int:
    total = 0
    for i in range(n):
        total += await gated(path, gate, i)
    return total


async def test_a_finished_step_survives_a_locked_sqlite_database(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Commits meet a real "database is locked" for a while: the step's result is
    committed once the lock goes, and its body is not run again."""
    path, gate = tmp_path / "journal", tmp_path / "gate"
    url = f"sqlite:///{tmp_path}/world.db?busy_timeout=0.05"
    async with worlds.open(url) as world, Worker(world, [gated_flow], lease_seconds=8):
        run = await start(gated_flow, str(path), str(gate), 2, world=world)
        with anyio.fail_after(10):
            while not starts(path):
                await anyio.sleep(0.02)
        locker = sqlite3.connect(tmp_path / "world.db", isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        gate.touch()  # the step finishes while the database is locked
        with anyio.fail_after(10):
            while "end" not in path.read_text():
                await anyio.sleep(0.02)
        await anyio.sleep(2.5)  # several commit attempts fail
        locker.execute("ROLLBACK")
        locker.close()
        assert await run.result(timeout=20) == 1
    assert sorted(starts(path)) == sorted(set(starts(path)))
    assert len(starts(path)) == 2
    failures = [r for r in caplog.records if "could not commit" in r.getMessage()]
    assert failures, "the lock never made a commit fail: the test proves nothing"
    # one line per failure, a traceback the first time only
    assert sum(1 for r in failures if r.exc_info) == 1


# --------------------------------------------------------------------------- poison


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


@step(max_retries=1, retry_delay=0)
async def broken() -> None:
    raise UnprintableError


@workflow
async def broken_flow() -> None:
    await broken()


async def test_an_exception_that_cannot_be_printed_still_fails_the_run(world: World) -> None:
    async with Worker(world, [broken_flow]):
        run = await start(broken_flow, world=world)
        with pytest.raises(RunFailedError, match="UnprintableError"):
            await run.result(timeout=20)
    failed = [e for e in await run.events() if isinstance(e, StepFailed)]
    assert [e.attempt for e in failed] == [2]


lost: list[int] = []


@step(max_retries=1)
async def counted() -> str:
    lost.append(get_step_metadata().attempt)
    if len(lost) == 1:
        await anyio.sleep_forever()  # until its worker shuts down and releases it
    return "done"


@workflow
async def counted_flow() -> str:
    return await counted()


async def test_lost_leases_count_as_attempts(world: World) -> None:
    """Attempts whose lease expired count (a released one does not): past
    max_retries the step fails with a reason, without running again."""
    lost.clear()
    async with Worker(world, [counted_flow], shutdown_grace=0.1):
        run = await start(counted_flow, world=world)
        with anyio.fail_after(10):
            while not lost:
                await anyio.sleep(0.01)
    # a "zombie" takes attempts 2 and 3 and lets each lease expire
    taken = 0
    with anyio.fail_after(10):
        while taken < 2:
            items = await world.lease("zombie", names={"counted"}, limit=1, lease_seconds=0.05)
            taken += len(items)
            await anyio.sleep(0.1)
    async with Worker(world, [counted_flow]):
        with pytest.raises(RunFailedError, match="earlier attempts lost their leases"):
            await run.result(timeout=20)
    assert lost == [1]
    failed = [e for e in await run.events() if isinstance(e, StepFailed)]
    assert [e.attempt for e in failed] == [4]


# --------------------------------------------------------------------------- cancellation


@step
async def endless(path: str) -> None:
    journal(path, "start")
    try:
        await anyio.sleep(60)
    finally:
        journal(path, "stopped")


@workflow
async def endless_flow(path: str) -> None:
    await endless(path)


async def test_cancellation_reaches_an_in_flight_step_within_seconds(
    world: World, tmp_path: Path
) -> None:
    path = tmp_path / "journal"
    async with Worker(world, [endless_flow], lease_seconds=60):
        run = await start(endless_flow, str(path), world=world)
        with anyio.fail_after(10):
            while not path.exists():
                await anyio.sleep(0.02)
        await run.cancel()
        # lease/3 is 20 s: only the quick check can stop the step within 5 s
        with anyio.fail_after(5):
            while "stopped" not in path.read_text():
                await anyio.sleep(0.02)
        assert await run.status() in (RunStatus.CANCELLING, RunStatus.CANCELLED)


# --------------------------------------------------------------------------- zombie

thief: dict[str, Callable[[], World]] = {}


def steal_the_step() -> list[WorkItem]:
    """Take ``overruns`` over as another registered worker would, from another thread
    and world object, while this worker's loop stays blocked (it cannot heartbeat):
    the thief beats steadily for more than the zombie's liveness window, which makes
    the zombie dead, then leases the step and says goodbye (so the next worker can
    take the step once the thief's short lease runs out)."""
    other = thief["open"]()
    info = WorkerInfo(id="thief", host="here", pid=os.getpid(), liveness_seconds=0.5)

    async def take(world: World) -> list[WorkItem]:
        await world.register_worker(info)
        with anyio.fail_after(20):
            while True:
                assert await world.heartbeat("thief", 0)
                taken = await world.lease("thief", names={"overruns"}, limit=1, lease_seconds=0.2)
                if taken:
                    await world.unregister_worker("thief")
                    return taken
                await anyio.sleep(0.05)

    async def lease() -> list[WorkItem]:
        if other is thief["world"]():  # a memory world: one object, already open
            return await take(other)
        async with other:
            return await take(other)

    taken: list[list[WorkItem]] = []
    failed: list[BaseException] = []

    def in_thread() -> None:
        try:
            taken.append(asyncio.run(lease()))
        except BaseException as exc:
            failed.append(exc)

    helper = threading.Thread(target=in_thread)
    helper.start()
    helper.join()  # blocking, on purpose: the worker's loop must not run meanwhile
    if failed:
        raise failed[0]
    return taken[0]


@step
async def overruns() -> int:
    attempt = get_step_metadata().attempt
    if attempt == 1:
        time.sleep(1.0)  # blocks the worker's loop past its window: no heartbeat...
        # ...and meanwhile another worker declares it dead and takes the step over
        taken = steal_the_step()
        assert [item.attempt for item in taken] == [2]
    return attempt


@workflow
async def zombie_flow() -> int:
    return await overruns()


async def test_a_zombie_is_fenced_and_its_result_never_lands(
    world: World, make_world: Callable[[], World]
) -> None:
    """A worker whose loop stalls past its liveness window while another worker beats
    is declared dead: its step is taken over, it is fenced (its leases revoked, its
    heartbeat refused) and stops, and the result it computed never lands."""
    thief["world"] = lambda: world
    thief["open"] = make_world
    async with Worker(world, [zombie_flow], lease_seconds=0.5, liveness_seconds=0.5) as zombie:
        # the worker's first poll finds nothing before the run exists, and its world
        # remembers that; the run's step is leased without a poll (the run starts in
        # this process), so the next worker on this world object learns of the
        # thief's lease ending from the safety poll alone (PostgreSQL's was a
        # minute, longer than the wait below: the takeover came too late)
        await anyio.sleep(0.2)
        run = await start(zombie_flow, world=world)
        with anyio.fail_after(30):
            while not zombie.fenced:
                await anyio.sleep(0.02)
    async with Worker(world, [zombie_flow], lease_seconds=0.5):
        assert await run.result(timeout=30) == 3
    completed = [e.attempt for e in await run.events() if isinstance(e, StepCompleted)]
    assert completed == [3], "the zombie's result landed"
    statuses = {worker.id: worker.status for worker in await world.list_workers()}
    assert statuses[zombie.worker_id] == "dead"
    assert statuses["thief"] == "stopped"


# ------------------------------------------------ a lease granted while stopping


class SlowLeases:
    """A world whose ``lease`` answers late: the worker may stop before the answer."""

    def __init__(self, inner: World) -> None:
        self.inner = inner
        self.asking = anyio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def lease(self, worker_id: str, **options: object) -> object:
        items = await self.inner.lease(worker_id, **options)  # type: ignore[arg-type]
        if items:
            self.asking.set()
            await anyio.sleep(0.3)  # granted by the world, not yet answered
        return items


@workflow
async def plain(x: int) -> int:
    return x


async def test_a_lease_granted_while_the_worker_stops_is_released(tmp_path: Path) -> None:
    """A worker that stopped while its lease call was in flight used to drop the
    items the world leased it: they stayed held until their lease expired, so the
    next worker waited (here 60 s) for a run nobody was running."""
    async with worlds.open(f"sqlite:///{tmp_path}/w.db") as world:
        run = await start(plain, 7, world=world)
        slow = SlowLeases(world)
        async with Worker(slow, [plain], lease_seconds=60):  # type: ignore[arg-type]
            await slow.asking.wait()
        async with Worker(world, [plain], lease_seconds=60):
            assert await run.result(timeout=10) == 7


async def test_a_full_world_is_an_outage_the_worker_rides_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker's world may grow its file to 200 pages (``max_pages``: SQLite's own
    SQLITE_FULL); an operator's fills the file past that, so the step's result does
    not fit. The worker says the world is full (once), keeps its lease, retries, and
    commits once the operator frees room; the step ran once, and the run the operator
    started meanwhile is intact."""
    caplog.set_level(logging.WARNING, logger="workflow.worker")
    path, journal, gate = tmp_path / "world.db", tmp_path / "journal", tmp_path / "gate"
    async with worlds.open(f"sqlite:///{path}") as operator:
        await operator.info()  # the file exists before the worker's world caps it
        capped = worlds.open(f"sqlite:///{path}?max_pages=200")
        async with capped, Worker(capped, [bulky_flow], lease_seconds=8) as worker:
            run, kept, filler = await full_while_bulky_runs(operator, path, journal, gate)
            with anyio.fail_after(30):
                while not [r for r in caplog.records if "the world is full" in r.getMessage()]:
                    await anyio.sleep(0.05)
            await anyio.sleep(1)  # more commits fail meanwhile
            assert worker.failure is None
            await free(filler, operator)
            assert await run.result(timeout=60) == RESULT_SIZE
            assert await kept.status() is RunStatus.PENDING
    assert journal.read_text().splitlines() == ["start", "end"]
    messages = [r.getMessage() for r in caplog.records if r.name == "workflow.worker"]
    assert len([m for m in messages if "the world is full" in m]) == 1, messages
    assert len([m for m in messages if "the world has room again" in m]) == 1, messages


async def test_every_outage_a_worker_logs_is_also_logged_as_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two short outages (a real "database is locked") seen by every loop of the worker
    (its poll and its schedule loop): each is logged once when it begins and once when
    it ends, and the second begins afresh (no "still unavailable" carried over)."""
    caplog.set_level(logging.WARNING, logger="workflow.worker")
    url = f"sqlite:///{tmp_path}/world.db?busy_timeout=0.05"
    async with worlds.open(url) as world, Worker(world, [plain], poll_interval=0.05):
        await create_schedule(plain, 1, id="often", every=1, world=world)
        for outage in range(1, 3):
            locker = sqlite3.connect(tmp_path / "world.db", isolation_level=None)
            locker.execute("BEGIN EXCLUSIVE")
            await anyio.sleep(2)  # every loop's calls fail meanwhile
            locker.execute("ROLLBACK")
            locker.close()
            with anyio.fail_after(15):  # the schedule loop's calls succeed again
                while len(_lines(caplog, "answers again")) < outage:
                    await anyio.sleep(0.05)
            await anyio.sleep(0.5)
    begun, ended = _lines(caplog, "the world is unavailable"), _lines(caplog, "answers again")
    assert len(begun) == len(ended) == 2, _lines(caplog, "")
    assert not _lines(caplog, "still"), _lines(caplog, "")


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    """The worker's log lines that contain ``text``."""
    messages = [r.getMessage() for r in caplog.records if r.name == "workflow.worker"]
    return [message for message in messages if text in message]


class GoodbyeDuringABeat(WorldWrapper):
    """A world whose answer to a heartbeat arrives only after the worker said goodbye,
    as a beat sent just before ``unregister_worker`` on another connection does when
    it waits on the worker's row lock."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.beating = anyio.Event()
        self.unregistered = anyio.Event()
        self.answered = anyio.Event()

    async def heartbeat(self, worker_id: str, in_flight: int) -> bool:
        self.beating.set()
        await self.unregistered.wait()
        alive = await super().heartbeat(worker_id, in_flight)
        self.answered.set()
        return alive

    async def unregister_worker(self, worker_id: str) -> None:
        await super().unregister_worker(worker_id)
        self.unregistered.set()
        with anyio.move_on_after(5):
            await self.answered.wait()  # the beat's answer is handled before this returns


async def test_a_beat_answered_after_goodbye_does_not_fence_a_stopping_worker(
    world: World,
) -> None:
    """A stopped worker's heartbeat is answered False; a worker whose beat crossed its
    own goodbye stops cleanly, not as fenced (``run()`` raised ``WorkerFencedError``,
    seen as a worker process exiting 1 after SIGTERM)."""
    wrapped = GoodbyeDuringABeat(world)
    worker = Worker(wrapped, [zombie_flow], liveness_seconds=0.4)
    async with anyio.create_task_group() as group:
        group.start_soon(worker.run)
        with anyio.fail_after(10):
            await wrapped.beating.wait()
        worker.stop()
    assert wrapped.answered.is_set()
    assert not worker.fenced
