"""``postgresql://...``: the world that many worker processes on many hosts share.

Same semantics as ``worlds.memory``, stored in PostgreSQL through asyncpg. Each
write of the protocol is one transaction; per-run sequence numbers are
allocated under the run row's lock (``SELECT ... FOR UPDATE``), unique claims
are rows of a table keyed by the (key, value) pair, and work is leased with
``FOR UPDATE SKIP LOCKED`` so leasing workers never wait for each other.
Transactions that enqueue work or close a run send a notification
(``pg_notify``, delivered when they commit; in the transaction, or right
after it while the world object has other writes in flight, so that
notifying commits still share WAL flushes: ``notices``); a dedicated listener
connection turns notifications into ``wait`` wake-ups, so idle workers wake
at once.

One clock: the server's. Lease expiry and the due times of timers and work
items are decided by the database server's clock, never by a worker's: the
statements that lease work compare against ``statement_timestamp()`` (so a
worker whose clock runs fast neither takes over a live lease nor fires a
timer early), and the times a world object writes (event times, lease
deadlines) are its process clock corrected by the offset to the server's
clock, measured when the pool opens and again every few seconds.

URL: any libpq-style URL asyncpg accepts (``postgresql://user:pw@host:5432/db``,
``postgres://...``, ``?host=/unix/socket/dir``...), plus these query parameters:
``schema`` (default ``public``), the schema holding the world's tables, created
if missing, so several applications can share one database; ``poll`` (seconds,
default 1.0), the longest ``wait`` sleeps without a notification before
callers look again; ``pool_size`` (default 10), the most pooled connections;
``command_timeout`` (seconds, default 4.0), the longest a statement or a new
connection may take (migrations excepted) before the operation raises
``WorldUnavailableError``.

Hung connections are detected (see ``worlds.postgres.connection``).

The package exports ``PostgresWorld`` (and ``WorldClosedError``, as it always
did); its other modules are private to it, so their names carry no underscore,
one job each: ``world`` (the operations: writes run the flows of
``worlds._flows``), ``rows`` (the flows' rows port over one transaction),
``connection`` (URL, retries, keepalives, the server's clock), ``fast`` and
``committing`` (the one-round-trip ``commit_run``, ``commit_runs``,
``start_run`` and ``create_run`` paths), ``functions`` (their live PL/pgSQL
text), ``notices`` and ``listening`` (notifications), ``schedules``,
``schema`` (the current schema for reading, and applying migrations),
``migrations`` (the frozen DDL of each version), ``statements`` (SQL text),
``filters`` (the run-filter compiler) and ``codecs`` (rows <-> records).
"""

try:
    import asyncpg  # noqa: F401
except ImportError as missing:
    raise ImportError(
        "the PostgreSQL world needs asyncpg, which the 'postgres' extra installs: "
        "pip install 'attribute-workflows[postgres]'"
    ) from missing

from worlds.errors import WorldClosedError
from worlds.postgres.world import PostgresWorld

__all__ = ["PostgresWorld", "WorldClosedError"]
