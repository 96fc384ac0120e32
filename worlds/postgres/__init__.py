"""``postgresql://...``: the world that many worker processes on many hosts share.

The package exports only ``PostgresWorld`` (``world.py``); its other modules are
private to it, one job each: ``connection`` (URL, pool options, keepalives, the
server's clock, retries), ``transactions`` (``Tx``, the steps of a write),
``fast`` (the one-round-trip ``commit_run`` path), ``schema`` (applying
migrations), ``migrations`` (the frozen DDL of each version), ``statements``
(SQL text), ``filters`` (the run-filter compiler) and ``codecs`` (rows <->
records).
"""

from worlds.errors import WorldClosedError
from worlds.postgres.world import PostgresWorld

__all__ = ["PostgresWorld", "WorldClosedError"]
