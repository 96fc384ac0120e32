"""Key limits of the memory world: each limited key's stored limit, virtual time
and its values' shares (``World.set_key_limit``).

These are the rows the flows (``worlds._flows.keys``, ``worlds._flows.key_limits``)
read and write through ``worlds.memory.rows``; writes go through the world's
``Journal``, so an operation that fails leaves them as they were.
"""

from __future__ import annotations

from worlds.memory.journal import Journal
from worlds.types import KeyLimit

__all__ = ["KeyLimitStore"]


class KeyLimitStore:
    """The memory world's key limits: by key, the limit and the key's virtual time;
    by (key, value index text), the value's share."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._limits: dict[str, tuple[KeyLimit, float]] = {}
        self._shares: dict[tuple[str, str], float] = {}
        self._queued: dict[tuple[str, str], bool] = {}
        """The values in their key's line (a dict so the journal can undo it)."""

    def get(self, key: str) -> tuple[KeyLimit, float] | None:
        """The key's limit and virtual time, or ``None``."""
        return self._limits.get(key)

    def put(self, limit: KeyLimit) -> None:
        """Store ``limit``, keeping the key's virtual time."""
        found = self._limits.get(limit.key)
        self._journal.put(self._limits, limit.key, (limit, 0.0 if found is None else found[1]))

    def drop(self, key: str) -> None:
        """Delete the key's limit and its values' shares."""
        self._journal.pop(self._limits, key)
        for pair in [pair for pair in self._shares if pair[0] == key]:
            self._journal.pop(self._shares, pair)
        for pair in [pair for pair in self._queued if pair[0] == key]:
            self._journal.pop(self._queued, pair)

    def share(self, key: str, ivalue: str) -> float:
        """The value's share (0 when none)."""
        return self._shares.get((key, ivalue), 0.0)

    def put_share(self, key: str, ivalue: str, share: float, vtime: float) -> None:
        """Store the value's share and the key's virtual time."""
        self._journal.put(self._shares, (key, ivalue), share)
        found = self._limits.get(key)
        if found is not None:
            self._journal.put(self._limits, key, (found[0], vtime))

    def queued(self, key: str, ivalue: str) -> bool:
        """Whether the value is in its key's line."""
        return (key, ivalue) in self._queued

    def enqueue(self, key: str, ivalue: str, share: float) -> None:
        """Store the value's share and put it in its key's line."""
        self._journal.put(self._shares, (key, ivalue), share)
        self._journal.put(self._queued, (key, ivalue), True)

    def leave(self, key: str, ivalue: str) -> None:
        """Take the value out of its key's line (its share stays)."""
        if (key, ivalue) in self._queued:
            self._journal.pop(self._queued, (key, ivalue))

    def line(
        self, key: str, after: tuple[float, str] | None, count: int
    ) -> list[tuple[str, float]]:
        """The next ``count`` values in the line of ``key`` after ``after``, by
        (pass, value index text), with their passes."""
        line = sorted((self.share(k, ivalue), ivalue) for k, ivalue in self._queued if k == key)
        if after is not None:
            line = [entry for entry in line if entry > after]
        return [(ivalue, share) for share, ivalue in line[:count]]

    def all(self) -> list[KeyLimit]:
        """Every stored key limit, by key."""
        return [limit for _, (limit, _) in sorted(self._limits.items())]

    def dump(
        self,
    ) -> tuple[list[tuple[KeyLimit, float]], list[tuple[str, str, float, bool]]]:
        """Every limit with its key's virtual time, by key, and every value's share
        and whether it is in the line, by (key, value index text): what a full dump
        holds."""
        limits = [found for _, found in sorted(self._limits.items())]
        shares = [
            (key, ivalue, share, (key, ivalue) in self._queued)
            for (key, ivalue), share in sorted(self._shares.items())
        ]
        return limits, shares

    def load(self, limit: KeyLimit, vtime: float) -> None:
        """Store a dumped limit with its virtual time."""
        self._journal.put(self._limits, limit.key, (limit, vtime))

    def load_share(self, key: str, ivalue: str, share: float, queued: bool) -> None:
        """Store a dumped value's share, in its key's line when ``queued``."""
        self._journal.put(self._shares, (key, ivalue), share)
        if queued:
            self._journal.put(self._queued, (key, ivalue), True)
