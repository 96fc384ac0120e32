"""Transaction steps per second: ours (``@transaction``) against DBOS's datasource
transactions (``@ds.transaction()``, DBOS 3's ``@DBOS.transaction``), on SQLite and
on one PostgreSQL server.

Workload: N one-step workflows, at most C in flight; the step is a transaction
that debits one of 100 accounts (``UPDATE ... WHERE id = i % 100``) and reads
the balance back, so each workflow is one database transaction holding the
step's write and its recorded result (ours: in the world's database; DBOS: its
datasource's ``transaction_outputs`` beside the write, plus its system
database). Each side runs in its own process (``--side ours|dbos``), with a
fresh database, after a few untimed warm-up workflows; the driver runs both
sides in the same run, alternating, ``--repeat`` times, and reports medians and
the ratio ours / DBOS.

- SQLite: ours on ``sqlite:///<tmp>/world.db`` (the accounts in that file);
  DBOS with its system database and its datasource both in one file of its own
  (``sqlite+aiosqlite`` for the datasource).
- PostgreSQL (``tests/pg_server.py``, the test server's settings, or
  ``--pg-url``): ours in a fresh schema of one database; DBOS with a fresh
  system database and a fresh datasource database on the same server
  (``postgresql+asyncpg``). Both isolation levels are each runtime's default
  (ours: REPEATABLE READ; DBOS: SERIALIZABLE), and both retry serialization
  failures.

Usage::

    python benchmarks/transactions.py [--n 500] [--concurrency 16] [--repeat 3] [--pg-url URL]

Writes ``benchmarks/results/transactions.json`` and prints one line per
database. Figures taken on a shared, loaded machine are noise beside each
other run to run: compare the ratio, measured in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ACCOUNTS = 100
WARMUP = 20


# ------------------------------------------------------------------ ours


async def ours(
    url: str, n: int, concurrency: int, app_sql: str, counter: Counter | None = None
) -> float:
    """Seconds for ``n`` workflows through our runtime on world ``url``; ``counter``
    counts the database's transactions and statements over them."""
    sys.path.insert(0, str(ROOT))
    import worlds
    from workflow import Worker, get_transaction, start, transaction, workflow

    sqlite = url.startswith("sqlite")

    @transaction(name="bench_debit")
    async def debit(account: int) -> int:
        tx = get_transaction()
        p = "?" if sqlite else "$1"
        await tx.execute(f"UPDATE accounts SET balance = balance - 1 WHERE id = {p}", account)
        rows = await tx.execute(f"SELECT balance FROM accounts WHERE id = {p}", account)
        return int(rows[0][0])

    @workflow(name="bench_pay")
    async def pay(account: int) -> int:
        return await debit(account)

    world = worlds.open(url)
    async with world:
        await world.migrate()
        await _create_accounts(world, sqlite, app_sql)
        async with Worker(world, [pay], concurrency=concurrency):
            await _drive(lambda i: _ours_one(start, pay, world, i), WARMUP, concurrency)
            if counter is not None:
                await counter.begin()
            began = time.perf_counter()
            await _drive(lambda i: _ours_one(start, pay, world, i), n, concurrency)
            seconds = time.perf_counter() - began
            if counter is not None:
                await counter.end(n)
            return seconds


async def _ours_one(start: Any, pay: Any, world: Any, i: int) -> None:
    run = await start(pay, i % ACCOUNTS, world=world)
    await run.result(timeout=300)


async def _create_accounts(world: Any, sqlite: bool, app_sql: str) -> None:
    rows = ", ".join(f"({i}, 1000000)" for i in range(ACCOUNTS))
    if sqlite:
        import sqlite3

        db = sqlite3.connect(world.path, isolation_level=None, timeout=30)
        db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance BIGINT)")
        db.execute(f"INSERT INTO accounts VALUES {rows}")
        db.close()
        return
    import asyncpg

    conn = await asyncpg.connect(world.dsn, server_settings={"search_path": world.schema})
    try:
        await conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance BIGINT)")
        await conn.execute(f"INSERT INTO accounts VALUES {rows}")
    finally:
        await conn.close()


# ------------------------------------------------------------------ DBOS


async def dbos(
    system_url: str, app_url: str, n: int, concurrency: int, counter: Counter | None = None
) -> float:
    """Seconds for ``n`` workflows through DBOS (system database ``system_url``,
    datasource ``app_url``); ``counter`` as for ``ours``."""
    import sqlalchemy as sa
    from dbos import DBOS, AsyncSQLAlchemyDatasource, DBOSConfig

    DBOS(
        config=DBOSConfig(
            name="tx-bench",
            system_database_url=system_url,
            log_level="WARNING",
            application_version="tx-bench",
        )
    )
    ds = await AsyncSQLAlchemyDatasource.create(app_url)
    rows = ", ".join(f"({i}, 1000000)" for i in range(ACCOUNTS))
    async with ds.engine.begin() as conn:
        await conn.execute(
            sa.text("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance BIGINT)")
        )
        await conn.execute(sa.text(f"INSERT INTO accounts VALUES {rows}"))

    @ds.transaction()
    async def debit(account: int) -> int:
        session = ds.sql_session()
        await session.execute(
            sa.text("UPDATE accounts SET balance = balance - 1 WHERE id = :a"), {"a": account}
        )
        found = await session.execute(
            sa.text("SELECT balance FROM accounts WHERE id = :a"), {"a": account}
        )
        return int(found.scalar_one())

    @DBOS.workflow()
    async def pay(account: int) -> int:
        return await debit(account)

    async def one(i: int) -> None:
        handle = await DBOS.start_workflow_async(pay, i % ACCOUNTS)
        await handle.get_result()

    DBOS.launch()
    try:
        await _drive(one, WARMUP, concurrency)
        if counter is not None:
            await counter.begin()
        began = time.perf_counter()
        await _drive(one, n, concurrency)
        seconds = time.perf_counter() - began
        if counter is not None:
            await counter.end(n)
        return seconds
    finally:
        DBOS.destroy(destroy_registry=True)
        await ds.engine.dispose()


# ------------------------------------------------------------------ counting


class Counter:
    """Transactions and statements the server ran for some databases over the timed
    workflows (``pg_stat_database``; ``pg_stat_statements``, top-level statements,
    ``BEGIN``/``COMMIT`` included), per workflow: each workflow is one transaction
    step, so these are the costs of one transaction step with its workflow."""

    def __init__(self, admin_url: str, databases: list[str], labels: list[str]) -> None:
        self.admin_url = admin_url
        self.databases = databases
        self.labels = labels
        self.report: dict[str, Any] = {}
        self._before: dict[str, int] = {}

    async def _transactions(self) -> dict[str, int]:
        import asyncpg

        await asyncio.sleep(1.5)  # backends flush their statistics about once a second
        conn = await asyncpg.connect(self.admin_url)
        try:
            rows = await conn.fetch(
                "SELECT datname, xact_commit + xact_rollback AS n FROM pg_stat_database"
                " WHERE datname = ANY($1::text[])",
                self.databases,
            )
        finally:
            await conn.close()
        return {row["datname"]: int(row["n"]) for row in rows}

    async def begin(self) -> None:
        import asyncpg

        self._before = await self._transactions()
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute("SELECT pg_stat_statements_reset()")
        finally:
            await conn.close()

    async def end(self, n: int) -> None:
        import asyncpg

        after = await self._transactions()
        conn = await asyncpg.connect(self.admin_url)
        try:
            rows = await conn.fetch(
                "SELECT d.datname, s.query, s.calls FROM pg_stat_statements s"
                " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = ANY($1::text[])"
                " AND s.toplevel ORDER BY s.calls DESC",
                self.databases,
            )
        finally:
            await conn.close()
        statements = sum(int(row["calls"]) for row in rows)
        self.report = {
            "transactions_per_workflow": round(
                sum(after[d] - self._before.get(d, 0) for d in after) / n, 2
            ),
            "statements_per_workflow": round(statements / n, 2),
            "top_statements": [
                {
                    "database": self.labels[self.databases.index(row["datname"])],
                    "per_workflow": round(int(row["calls"]) / n, 2),
                    "query": " ".join(str(row["query"]).split())[:160],
                }
                for row in rows[:30]
            ],
        }


# ------------------------------------------------------------------ driver


async def _drive(one: Any, n: int, concurrency: int) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def bounded(i: int) -> None:
        async with semaphore:
            await one(i)

    await asyncio.gather(*(bounded(i) for i in range(n)))


def _side(argv: list[str]) -> dict[str, Any]:
    command = [sys.executable, __file__, *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def pg_execute(url: str, statement: str) -> None:
    """Run one ``statement`` on the PostgreSQL server at ``url`` (its own connection)."""
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


def _database_of(url: str) -> str:
    """The database name in a PostgreSQL URL."""
    return url.partition("?")[0].rsplit("/", 1)[1]


def with_database(url: str, name: str, scheme: str = "postgresql") -> str:
    """``url`` naming database ``name`` instead (and the URL scheme ``scheme``)."""
    base, sep, query = url.partition("?")
    rest = base.split("://", 1)[1].rsplit("/", 1)[0]
    return f"{scheme}://{rest}/{name}{sep}{query}"


def _measure(
    kind: str, server: str | None, n: int, concurrency: int, tmp: Path, count: bool
) -> dict[str, Any]:
    """One measurement of each side on database ``kind``; with ``count`` (PostgreSQL
    with ``pg_stat_statements``) the transactions and statements of each side."""
    common = ["--n", str(n), "--concurrency", str(concurrency)]
    if kind == "sqlite":
        ours_dir, dbos_dir = tmp / f"o-{uuid.uuid4().hex[:6]}", tmp / f"d-{uuid.uuid4().hex[:6]}"
        ours_dir.mkdir()
        dbos_dir.mkdir()
        ours_url = f"sqlite:///{ours_dir}/world.db"
        dbos_file = dbos_dir / "dbos.sqlite"
        mine = _side(["--side", "ours", "--world", ours_url, *common])
        theirs = _side(
            [
                "--side",
                "dbos",
                "--system",
                f"sqlite:///{dbos_file}",
                "--app",
                f"sqlite+aiosqlite:///{dbos_file}",
                *common,
            ]
        )
        return {"ours": mine, "dbos": theirs}
    assert server is not None
    if count:
        common += ["--count-admin", server]
    tag = uuid.uuid4().hex[:8]
    names = [f"ours_{tag}", f"sys_{tag}", f"app_{tag}"]
    for name in names:
        pg_execute(server, f'CREATE DATABASE "{name}"')
    try:
        ours_url = with_database(server, names[0])
        ours_url += ("&" if "?" in ours_url else "?") + "command_timeout=60"
        mine = _side(["--side", "ours", "--world", ours_url, *common])
        theirs = _side(
            [
                "--side",
                "dbos",
                "--system",
                with_database(server, names[1]),
                "--app",
                with_database(server, names[2], "postgresql+asyncpg"),
                *common,
            ]
        )
        return {"ours": mine, "dbos": theirs}
    finally:
        for name in names:
            pg_execute(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=["ours", "dbos"])
    parser.add_argument("--world")
    parser.add_argument("--system")
    parser.add_argument("--app")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--only", choices=["sqlite", "postgres"], default=None)
    parser.add_argument("--count-admin", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.side is not None:
        urls = [args.world] if args.side == "ours" else [args.system, args.app]
        counter = None
        if args.count_admin:
            labels = ["world"] if args.side == "ours" else ["system", "datasource"]
            counter = Counter(args.count_admin, [_database_of(url) for url in urls], labels)
        real_stdout, sys.stdout = sys.stdout, sys.stderr  # DBOS prints on stdout
        if args.side == "ours":
            seconds = asyncio.run(ours(args.world, args.n, args.concurrency, "", counter))
        else:
            seconds = asyncio.run(dbos(args.system, args.app, args.n, args.concurrency, counter))
        sys.stdout = real_stdout
        line: dict[str, Any] = {"seconds": seconds, "per_second": args.n / seconds}
        if counter is not None:
            line.update(counter.report)
        print(json.dumps(line))
        return

    sys.path.insert(0, str(ROOT))
    from tests import pg_server

    tmp = Path(tempfile.mkdtemp(prefix="tx-bench-"))
    directory = None
    server = args.pg_url
    try:
        count = False
        if server is None and args.only != "sqlite":
            directory = tempfile.mkdtemp(prefix="tx-bench-pg-")
            server = pg_server.start(
                directory, settings={"shared_preload_libraries": "pg_stat_statements"}
            ).socket_url
            pg_execute(server, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            count = True
        report: dict[str, Any] = {
            "n": args.n,
            "concurrency": args.concurrency,
            "load_before": os.getloadavg()[0],
        }
        kinds = [args.only] if args.only else ["sqlite", "postgres"]
        for kind in kinds:
            runs = [
                _measure(kind, server, args.n, args.concurrency, tmp, count)
                for _ in range(args.repeat)
            ]
            ours_rate = statistics.median(r["ours"]["per_second"] for r in runs)
            dbos_rate = statistics.median(r["dbos"]["per_second"] for r in runs)
            report[kind] = {
                "runs": runs,
                "ours_per_second": ours_rate,
                "dbos_per_second": dbos_rate,
                "ratio": ours_rate / dbos_rate,
            }
            print(
                f"{kind}: ours {ours_rate:.0f}/s, DBOS {dbos_rate:.0f}/s,"
                f" ratio {ours_rate / dbos_rate:.2f} (n={args.n}, C={args.concurrency})"
            )
            for side in ("ours", "dbos"):
                if "statements_per_workflow" in runs[0][side]:
                    report[kind][f"{side}_transactions_per_workflow"] = statistics.median(
                        r[side]["transactions_per_workflow"] for r in runs
                    )
                    report[kind][f"{side}_statements_per_workflow"] = statistics.median(
                        r[side]["statements_per_workflow"] for r in runs
                    )
                    print(
                        f"  {side}: {report[kind][f'{side}_transactions_per_workflow']}"
                        f" transactions, {report[kind][f'{side}_statements_per_workflow']}"
                        " statements per workflow (one transaction step)"
                    )
        report["load_after"] = os.getloadavg()[0]
        out = ROOT / "benchmarks" / "results" / "transactions.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
    finally:
        if directory is not None:
            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
