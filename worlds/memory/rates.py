"""Rate-limit tokens of the memory world: the tokens each rate-limited pair handed out.

A token is (time, run id, number, rate); ``number`` is 0 for a run's start and
a ``rate_limit`` call's number otherwise. These are the rows the flows
(``worlds._flows.rates``) read and write through ``worlds.memory.rows``;
writes go through the world's ``Journal``.
"""

from __future__ import annotations

from datetime import datetime

from worlds._flows.rows import Pair, Reserved, Token
from worlds.memory.journal import Journal

__all__ = ["RateStore"]


class RateStore:
    """The memory world's rate-limited pairs: ``Token`` rows by pair, then by (run, number)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._pairs: dict[Pair, dict[tuple[str, int], Token]] = {}
        self._priorities: dict[str, int] = {}
        """By run: the priority its start-time tokens were taken with."""

    def tokens(self, pair: Pair, lapsed: datetime, count: int) -> list[Token]:
        """Drop the pair's tokens at or before ``lapsed``; the ``count`` newest, newest first."""
        rows = self._pairs.get(pair, {})
        for owner, token in list(rows.items()):
            if token.at <= lapsed:
                self._journal.pop(rows, owner)
        return sorted(rows.values(), key=lambda token: token.at, reverse=True)[:count]

    def of_run(self, run_id: str) -> list[tuple[Pair, Token, int]]:
        """Every token of ``run_id``: its pair, the token and its number."""
        return [
            (pair, token, number)
            for pair, rows in self._pairs.items()
            for (owner, number), token in rows.items()
            if owner == run_id
        ]

    def dump(self) -> list[tuple[Pair, int, Token, int]]:
        """Every token: its pair, number, the token and its run's start priority."""
        return [
            (pair, number, token, self._priorities.get(owner, 0) if number == 0 else 0)
            for pair, rows in self._pairs.items()
            for (owner, number), token in rows.items()
        ]

    def drop(self, pair: Pair, run_id: str, number: int) -> None:
        """Drop token ``number`` of ``run_id`` at ``pair``."""
        rows = self._pairs.get(pair)
        if rows is not None and (run_id, number) in rows:
            self._journal.pop(rows, (run_id, number))

    def after(self, pair: Pair, since: datetime, count: int) -> list[Token]:
        """The pair's first ``count`` tokens after ``since``, oldest first."""
        rows = self._pairs.get(pair, {})
        return sorted((t for t in rows.values() if t.at > since), key=lambda t: t.at)[:count]

    def reserved(self, pair: Pair, after: datetime, priority: int) -> list[Reserved]:
        """The pair's start-time tokens after ``after`` of a higher priority, oldest first."""
        found = [
            Reserved(token.at, owner, self._priorities.get(owner, 0))
            for (owner, number), token in self._pairs.get(pair, {}).items()
            if number == 0 and token.at > after
        ]
        return sorted((r for r in found if r.priority > priority), key=lambda r: r.at)

    def insert(self, pair: Pair, run_id: str, number: int, token: Token, priority: int = 0) -> None:
        """Store ``token`` of (``run_id``, ``number``) at ``pair``."""
        if number == 0 and priority:
            self._journal.put(self._priorities, run_id, priority)
        rows = self._pairs.get(pair)
        if rows is None:
            rows = {}
            self._journal.put(self._pairs, pair, rows)
        self._journal.put(rows, (run_id, number), token)
