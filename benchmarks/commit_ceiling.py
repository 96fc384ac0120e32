"""The raw commit ceiling: how many tiny SQLite write transactions per second this
machine's disk allows, in WAL mode, at ``synchronous=FULL`` and ``NORMAL``.

Each transaction inserts one small row into a fresh file, as plain ``sqlite3``
with nothing else around it, so a workflow runtime's throughput can be read
as a fraction of what the storage could do at the same durability. Prints one
JSON line on stdout.

Usage::

    python benchmarks/commit_ceiling.py [--seconds 2] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path


def commits_per_second(path: Path, synchronous: str, seconds: float) -> float:
    """Single-row write transactions per second on a fresh WAL file at ``synchronous``."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {synchronous}")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
        payload = b"x" * 200
        done = 0
        began = time.perf_counter()
        while (elapsed := time.perf_counter() - began) < seconds:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (data) VALUES (?)", (payload,))
            db.execute("COMMIT")
            done += 1
        return done / elapsed
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--dir", help="where to put the files (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        result = {
            level.lower(): round(commits_per_second(Path(tmp) / f"{level}.db", level, args.seconds))
            for level in ("FULL", "NORMAL")
        }
    print(json.dumps({"commits_per_second": result}))


if __name__ == "__main__":
    main()
