"""A workflow app for the transaction crash test: each run debits one account once.

``debit`` is a transaction step: it logs that it began (``$DEBITAPP_LOG``, one
``start run attempt time pid`` line per call), moves one unit from the bank's
account to the run's row of ``debits`` and waits a little inside the
transaction, so a SIGKILL often lands while it is open. The tables carry no
uniqueness that would hide a debit applied twice. ``$DEBITAPP_DATABASE`` names
an application database (PostgreSQL) to write in instead of the world's.
"""

from __future__ import annotations

import os
import sqlite3
import time

import anyio

from workflow import get_step_metadata, get_transaction, transaction, workflow


def _log(run_id: str, attempt: int) -> None:
    with open(os.environ["DEBITAPP_LOG"], "a") as log:
        log.write(f"start {run_id} {attempt} {time.time()} {os.getpid()}\n")
        log.flush()
        os.fsync(log.fileno())


DATABASE = os.environ.get("DEBITAPP_DATABASE") or None
"""The application database (``database=``), or none: the world's own."""


# Every kill loses the attempts its worker had leased, and a lost attempt counts:
# dozens of kills must not exhaust a step's retries.
@transaction(retry_delay=0.0, max_retries=1000, database=DATABASE)
async def debit(amount: int) -> int:
    meta = get_step_metadata()
    _log(meta.run_id, meta.attempt)
    tx = get_transaction()
    sqlite = isinstance(tx.raw, sqlite3.Connection)
    mark = ("?", "?") if sqlite else ("$1", "$2")
    await tx.execute(f"UPDATE accounts SET balance = balance - {mark[0]} WHERE id = 'bank'", amount)
    await tx.execute(
        f"INSERT INTO debits (run_id, amount) VALUES ({mark[0]}, {mark[1]})", meta.run_id, amount
    )
    await anyio.sleep(0.03)  # open long enough for kills to land inside
    (balance,) = (await tx.execute("SELECT balance FROM accounts WHERE id = 'bank'"))[0]
    return int(balance)


@workflow
async def pay(amount: int) -> int:
    return await debit(amount)
