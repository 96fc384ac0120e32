"""What can go wrong with a world itself, as opposed to with a run in it.

Worlds raise these (or let a driver error through, which ``as_world_error``
translates), and the worker and the ``wf`` command decide from the class alone
whether waiting can help::

    WorldError                      the world could not do what was asked
    ├── WorldClosedError            used after close(); also a RuntimeError
    ├── WorldUnavailableError       may heal by waiting: retry with backoff
    │   │                           (connection refused or reset, server restarting,
    │   │                           timeout, database locked, too many connections, a
    │   │                           PostgreSQL server that is read-only or in recovery:
    │   │                           a standby, or a primary being failed over)
    │   └── WorldDeadlockError      two transactions waited for each other and the
    │                               database undid this one: retry it
    └── WorldMisconfiguredError     cannot heal by waiting: stop and say why
        │                           (database missing, authentication failed,
        │                           a read-only SQLite file, schema newer than this
        │                           code, a directory or non-database file as the path)
        ├── WorldFileReplacedError  the world's file was deleted or replaced under it
        └── WorldFullError          out of disk (or SQLite's max_page_count): heals
                                    when space is freed, so a worker waits it out

This module imports nothing internal (nor any database driver: drivers' errors
are recognised by their SQLSTATE or SQLite error name).
"""

from __future__ import annotations

__all__ = [
    "CodecRequiredError",
    "LeaseLostError",
    "TransactionConflictError",
    "TransactionsUnsupportedError",
    "WorldClosedError",
    "WorldDeadlockError",
    "WorldError",
    "WorldFileReplacedError",
    "WorldFullError",
    "WorldMisconfiguredError",
    "WorldUnavailableError",
    "as_world_error",
    "is_read_only_server",
]


class WorldError(Exception):
    """The root of every world error; ``str()`` is one line fit for a user."""


class WorldClosedError(WorldError, RuntimeError):
    """Raised when a world is used after ``close()``."""


class WorldUnavailableError(WorldError):
    """Raised when the world cannot answer now but may later: retry with backoff."""


class WorldDeadlockError(WorldUnavailableError):
    """Raised when the database broke a deadlock by undoing this transaction.

    Nothing of it was written; trying again is safe and usually succeeds at once.
    """


class TransactionConflictError(WorldUnavailableError):
    """Raised when the database undid a transaction step's transaction to resolve a
    conflict with another (a serialization failure, a deadlock).

    Nothing of it was written; the worker runs the step's function again in a new
    transaction, without counting an attempt.
    """


class LeaseLostError(WorldError):
    """Raised when a transaction step's transaction opens after its lease was lost
    (it expired and another worker took the step over, or the run closed): nothing
    of the step ran."""


class TransactionsUnsupportedError(WorldError):
    """Raised when a world that keeps no database is asked for a transaction step."""


class WorldMisconfiguredError(WorldError):
    """Raised when waiting cannot help: the world's configuration or files must change."""


class WorldFileReplacedError(WorldMisconfiguredError):
    """Raised when the file a world opened is no longer the file at its path.

    Someone deleted the file, or put another one in its place, while the world
    had it open. Writing on would go to a file nobody can open again, so the
    world refuses every operation (nothing of the refused one was written);
    open the world again to use the file now at the path.
    """


class WorldFullError(WorldMisconfiguredError):
    """Raised when the world's storage is full; nothing of the failed change was written.

    A worker treats it as an outage (it keeps its leases and retries until space
    is freed); a client sees it as the answer to its call.
    """


class CodecRequiredError(WorldMisconfiguredError):
    """Raised when payloads would be written or read without the codec they need.

    A world records the payload codec its payloads were first written with
    (``worlds.codec.CodecWorld``); writing payloads to it without that codec
    is refused (nothing is written), and a payload a codec wrote cannot be read
    without it. ``codec`` names the codec needed, when the world recorded it.
    """

    def __init__(self, message: str, codec: str | None = None) -> None:
        super().__init__(message)
        self.codec = codec


# SQLite primary result codes (``sqlite3.Error.sqlite_errorname`` starts with them).
_SQLITE_MISCONFIGURED = (
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_NOTADB",
    "SQLITE_PERM",
    "SQLITE_AUTH",
    "SQLITE_CORRUPT",
)
_SQLITE_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_PROTOCOL")

# PostgreSQL SQLSTATE classes and codes (asyncpg errors carry ``sqlstate``).
_PG_FULL = ("53100",)  # disk_full
_PG_DEADLOCK = ("40P01",)  # deadlock_detected
_PG_UNAVAILABLE_CLASSES = ("08", "40", "53", "57", "58")  # connection, rollback, resources,
# operator intervention (shutdown, restart), system error
_PG_MISCONFIGURED = ("28000", "28P01", "3D000", "42501", "3F000")
# bad authorization, bad password, database does not exist, insufficient privilege,
# schema does not exist
_PG_READ_ONLY = "25006"  # read_only_sql_transaction: "cannot execute INSERT in a read-only
# transaction", "cannot execute NOTIFY during recovery"
_PG_NOT_IN_STATE = "55000"  # object_not_in_prerequisite_state: "recovery is in progress"
_PG_READ_ONLY_ADVICE = (
    "the server is read-only (a standby, or a primary being failed over); waiting for a"
    " primary. If this lasts, the world URL leads to no primary: list every host"
    " (postgresql://h1,h2/db), and the world connects to the one that accepts writes"
)


def is_read_only_server(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL refusing a write because the server is read-only.

    A hot standby, a server in recovery, or a primary that a failover manager
    fenced (``default_transaction_read_only``) answers so; a failover may be
    under way. A connection that was refused for not being a primary
    (``target_session_attrs``) counts too. The PostgreSQL world then drops its
    connections so that the next ones look for the primary again.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate == _PG_READ_ONLY:
        return True
    if sqlstate == _PG_NOT_IN_STATE and "recovery" in str(exc):
        return True
    return type(exc).__name__ == "TargetServerAttributeNotMatched" and type(
        exc
    ).__module__.startswith("asyncpg")


def as_world_error(exc: BaseException) -> WorldError | None:
    """Translate a driver's exception into a ``WorldError``, or ``None`` if it is not one.

    A ``WorldError`` is returned as it is. ``OSError`` (refused, reset, timed out)
    and ``TimeoutError`` count as unavailable, and so does a PostgreSQL server
    that is read-only (``is_read_only_server``): during a failover it is the
    standby before its promotion, or the old primary fenced. Anything else (a bug, a bad
    argument) is not a world error and gives ``None``.
    """
    if isinstance(exc, WorldError):
        return exc
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        message = f"SQLite: {exc}"
        if name.startswith("SQLITE_FULL"):
            return WorldFullError(message)
        if name.startswith(_SQLITE_MISCONFIGURED):
            return WorldMisconfiguredError(message)
        if name.startswith(_SQLITE_UNAVAILABLE):
            return WorldUnavailableError(message)
        return None
    if is_read_only_server(exc):
        return WorldUnavailableError(f"PostgreSQL: {exc}: {_PG_READ_ONLY_ADVICE}")
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        message = f"PostgreSQL: {exc}"
        if sqlstate in _PG_FULL:
            return WorldFullError(message)
        if sqlstate in _PG_DEADLOCK:
            return WorldDeadlockError(
                f"PostgreSQL deadlock (transactions locked rows in different orders;"
                f" this one was undone and may be retried): {exc}"
            )
        if sqlstate in _PG_MISCONFIGURED:
            return WorldMisconfiguredError(message)
        if sqlstate[:2] in _PG_UNAVAILABLE_CLASSES:
            return WorldUnavailableError(message)
        return None
    if isinstance(exc, TimeoutError):
        detail = str(exc) or "timed out"
        return WorldUnavailableError(f"the database did not answer in time ({detail})")
    if isinstance(exc, OSError):
        return WorldUnavailableError(f"{type(exc).__name__}: {exc}")
    if type(exc).__module__.startswith("asyncpg") and type(exc).__name__ in (
        "ConnectionDoesNotExistError",
        "InterfaceError",
        "InternalClientError",
    ):
        return WorldUnavailableError(f"PostgreSQL: {exc}")
    return None
