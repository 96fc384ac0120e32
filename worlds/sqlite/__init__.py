"""``sqlite:///path.db``: the embedded, durable world (the default).

Same semantics as ``worlds.memory``, stored in one SQLite file that any number
of processes on one machine may share. The file runs in WAL mode with
``synchronous=FULL``: every acknowledged write (a started run, a recorded
step result, a closed run) has been fsynced and survives a power loss or an
OS crash. Every write is one ``BEGIN IMMEDIATE`` transaction, so
writers from several processes queue on SQLite's write lock instead of losing
updates, and a lock that is still busy after the busy timeout is retried.

Each world object owns one aiosqlite connection, opened on first use. A whole
operation (its transaction included) is one function over that connection,
and operations of one world object never interleave. The function runs
inline on the event loop when it cannot block: the connection is idle and
SQLite grants the write lock at once (small transactions in WAL mode take
tens of microseconds, less than a hop to another thread). Otherwise it runs
on aiosqlite's thread, where it may wait for the lock: one thread hop per
operation, however many statements it takes. WAL checkpoints run on a
background thread with a connection of their own, so no commit pays for one.

URL forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` and
``sqlite:///:memory:``. Query parameters: ``poll`` (seconds, default 0.05), the
longest ``wait`` sleeps before looking again for changes made by other
processes; ``busy_timeout`` (seconds, default 10), how long a statement waits
for another process's lock; ``inline`` (1 or 0, default 1), whether
operations may run on the event loop; ``max_pages`` (default 0, no limit), the
most pages (4 KiB each by default) the file may grow to, SQLite's
``max_page_count``; ``synchronous`` (``full``, the default, or ``normal``).
``?synchronous=normal`` trades durability for speed: a process crash still
loses nothing, but a power loss or OS crash can roll back the commits since
the last checkpoint, so a run whose result a client already saw can revert
to an earlier state or vanish, and its steps run again. Any other value is
refused with ``ValueError`` when the world is opened. ``info()`` reports the
level the connection runs at.

Errors: the driver's errors leave every operation as the ``worlds.errors``
tree. A full disk (or ``max_pages`` reached) raises ``WorldFullError`` and
writes nothing of the failed operation (its transaction is rolled back); a
place where the file cannot be created or opened raises
``WorldMisconfiguredError``; a lock held past the busy timeout raises
``WorldUnavailableError``. A file deleted or replaced while the world has it
open (its path no longer leads to the device and inode opened) raises
``WorldFileReplacedError`` before every operation and before every commit, so
nothing is acknowledged into a file nobody can open again.

The package exports only ``SqliteWorld`` (and ``WorldClosedError``, as it
always has); its modules are private, one job each: ``world`` (the protocol
operations: writes run the flows of ``worlds._flows``), ``rows`` (the flows'
rows port over one write transaction), ``connection`` (opening the file, where
operations run, group commit), ``transactions`` (``BEGIN IMMEDIATE`` and lock
retries), ``schema`` (the current DDL, applying migrations), ``migrations``
(frozen SQL, one module per version), ``statements`` (SQL text), ``schedules``,
``filters`` (the run-filter compiler) and ``codecs`` (rows to records and back).
"""

from worlds._lifecycle import WorldClosedError
from worlds.sqlite.world import SqliteWorld

__all__ = ["SqliteWorld", "WorldClosedError"]
