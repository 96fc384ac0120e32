"""``memory://``: a world that lives in one process's memory.

The in-memory twin of the durable worlds: same semantics, no durability. Every
operation runs without awaiting in the middle, so on one event loop each is
atomic by construction. Useful for tests and as the reference a third-party
world can read before writing its own.

The package exports only ``MemoryWorld``; its modules are private, one job
each: ``world`` (the protocol operations, keeping the runs and their events)
and the stores it composes: ``work`` (the work queue and its leases),
``claims``, ``slots`` (flow-control slots), ``hooks`` (hook tokens),
``streams`` and ``schedules``.
"""

from worlds.memory.world import MemoryWorld

__all__ = ["MemoryWorld"]
