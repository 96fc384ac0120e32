"""SIGKILL workers again and again while runs debit an account through transaction steps.

Every run debits the bank's account once through a ``@transaction`` step;
worker processes are killed with SIGKILL over and over (40 times in about a
minute with ``WORKFLOW_TEST_FULL=1``; fewer if every debit landed first), often
while a debit's transaction is open. However many times the function ran, each
run's debit is applied exactly once: the balance, the ``debits`` rows and the
recorded results agree, on a shared SQLite file and on PostgreSQL, and in an
application database (``@transaction(database=...)``) beside an SQLite world.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

import worlds
from tests.apps.debitapp import pay
from tests.conftest import full_size
from workflow import RunStatus, start
from worlds.types import StepCompleted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RUNS = full_size(60, 200)
KILLS = full_size(10, 40)
KILL_EVERY = 60.0 / 40
"""Seconds between kills at most (40 in a minute); a kill also waits for a debit in flight."""
START_WAIT = 5.0
"""The longest a kill waits for a debit to start before it lands anyway."""
BALANCE = 1_000_000


def spawn_worker(url: str, log: Path, database: str | None) -> subprocess.Popen[bytes]:
    """A ``wf worker`` process; its stderr goes to a file beside ``log``."""
    env = {**os.environ, "DEBITAPP_LOG": str(log), "PYTHONPATH": str(ROOT)}
    env["DEBITAPP_DATABASE"] = database or ""
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.debitapp", "--world", url]
    command += ["--lease-seconds", "1", "--concurrency", "8"]
    errors = log.with_name(f"worker-{len(list(log.parent.glob('worker-*')))}.err")
    with errors.open("wb") as stderr:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )


class Ledger:
    """The app's tables (in the world's database, or in ``database``), read and
    written directly."""

    def __init__(self, url: str, database: str | None = None) -> None:
        self.url = url
        self.world = worlds.open(url)
        self.database = database

    async def run(self, sql: str) -> list[tuple[object, ...]]:
        if self.database is not None:
            conn = await asyncpg.connect(self.database)
            try:
                return [tuple(row) for row in await conn.fetch(sql)]
            finally:
                await conn.close()
        path = getattr(self.world, "path", None)
        if path is not None:
            db = sqlite3.connect(path, isolation_level=None, timeout=60)
            try:
                return [tuple(row) for row in db.execute(sql).fetchall()]
            finally:
                db.close()
        dsn, schema = self.world.dsn, self.world.schema  # type: ignore[attr-defined]
        conn = await asyncpg.connect(dsn, server_settings={"search_path": f'"{schema}"'})
        try:
            return [tuple(row) for row in await conn.fetch(sql)]
        finally:
            await conn.close()


def _starts(log: Path) -> int:
    return log.read_text().count("start ")


def _last_starter(log: Path) -> int | None:
    """The pid of the worker that began the latest debit (its log line's last field)."""
    lines = log.read_text().splitlines()
    return int(lines[-1].split()[-1]) if lines else None


async def _debits(ledger: Ledger) -> int:
    """The debits committed so far (each run commits exactly one)."""
    ((count,),) = await ledger.run("SELECT count(*) FROM debits")
    return int(count)  # type: ignore[call-overload]


async def debit_through_kills(
    url: str, tmp_path: Path, database: str | None = None, size: int = RUNS, kill_count: int = KILLS
) -> None:
    log = tmp_path / "debits.log"
    log.touch()
    ledger = Ledger(url, database)
    async with ledger.world:
        await ledger.world.migrate()
        await ledger.run("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)")
        await ledger.run("CREATE TABLE debits (run_id TEXT NOT NULL, amount BIGINT NOT NULL)")
        await ledger.run(f"INSERT INTO accounts VALUES ('bank', {BALANCE})")
        runs = [await start(pay, 1, world=ledger.world) for _ in range(size)]
        procs = [spawn_worker(url, log, database) for _ in range(2)]
        chance = random.Random(29)
        kills = 0
        try:
            while kills < kill_count and await _debits(ledger) < size:
                began = anyio.current_time()
                seen = _starts(log)
                # a debit in flight; not forever: once the last runs' attempts wait for a
                # killed holder's verdict (a liveness window), a kill lands anyway, and
                # once every debit landed there is nothing left to interrupt
                with anyio.move_on_after(START_WAIT):
                    while _starts(log) == seen:
                        await anyio.sleep(0.005)
                await anyio.sleep(chance.uniform(0, 0.03))  # somewhere inside the transaction
                # the worker whose debit is open, not either one: a kill of the other worker
                # interrupts nothing, and a few such kills could leave no debit interrupted
                starter = _last_starter(log)
                pids = [proc.pid for proc in procs]
                n = pids.index(starter) if starter in pids else chance.randrange(len(procs))
                victim = procs.pop(n)
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                procs.append(spawn_worker(url, log, database))
                kills += 1
                await anyio.sleep(max(0.0, KILL_EVERY - (anyio.current_time() - began)))
            procs.append(spawn_worker(url, log, database))
            results = [await run.result(timeout=300) for run in runs]
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

        ((balance,),) = await ledger.run("SELECT balance FROM accounts WHERE id = 'bank'")
        assert balance == BALANCE - size, "each run's debit applied exactly once"
        per_run = Counter(run_id for (run_id, _) in await ledger.run("SELECT * FROM debits"))
        assert per_run == Counter({run.id: 1 for run in runs})
        # the balances the runs recorded are the balances their debits left: all distinct
        assert sorted(results) == list(range(BALANCE - size, BALANCE))
        for run in runs:
            assert await run.status() is RunStatus.COMPLETED
            completed = [e for e in await run.events() if isinstance(e, StepCompleted)]
            assert len(completed) == 1
        # the kills interrupted debits in flight: some functions ran more often than committed
        assert kills > 0 and _starts(log) > size


async def test_sigkilled_workers_debit_exactly_once_on_sqlite(tmp_path: Path) -> None:
    await debit_through_kills(f"sqlite:///{tmp_path}/world.db", tmp_path)


async def test_sigkilled_workers_debit_exactly_once_on_postgres(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue("postgres_world_url"))
    await debit_through_kills(url, tmp_path)


async def test_sigkilled_workers_debit_exactly_once_in_an_application_database(
    tmp_path: Path, app_database: str
) -> None:
    """The world is an SQLite file; the account lives in a PostgreSQL database of its
    own, where each debit's output is recorded with it and copied to the log after."""
    await debit_through_kills(f"sqlite:///{tmp_path}/world.db", tmp_path, app_database)
