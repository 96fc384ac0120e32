"""Exactly-once database steps: a debit that happens once however often workers die.

Run it: ``python examples/transfer.py`` (an SQLite world in ``transfer.db``).
"""

from __future__ import annotations

import asyncio
import sqlite3

import worlds
from workflow import Worker, get_transaction, start, transaction, workflow


@transaction
async def debit(account: str, cents: int) -> int:
    tx = get_transaction()  # the world's own database, in the step's transaction
    await tx.execute("UPDATE accounts SET cents = cents - ? WHERE id = ?", cents, account)
    rows = await tx.execute("SELECT cents FROM accounts WHERE id = ?", account)
    return int(rows[0][0])  # committed together with the writes above


@workflow
async def pay(account: str, cents: int) -> int:
    return await debit(account, cents)


async def main(path: str = "transfer.db") -> int:
    world = worlds.open(f"sqlite:///{path}")
    async with world:
        await world.migrate()  # creates the file; the app's table lives beside the log
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, cents INT)")
            db.execute("INSERT OR REPLACE INTO accounts VALUES ('alice', 10000)")
        async with Worker(world, [pay]):
            run = await start(pay, "alice", 1999, world=world)
            left: int = await run.result()
    print(f"alice has {left} cents left")
    return left


if __name__ == "__main__":
    asyncio.run(main())
