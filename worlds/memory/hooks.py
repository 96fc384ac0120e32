"""Hook tokens of the memory world: who holds each token, and the resumes already delivered.

A token is held by one run at a time; a run's unbound tokens (``hook=0``) were
delivered to before the run created its hook, or carried over by
continue-as-new. ``resumed`` remembers where each ``(token, resume_id)`` went so
a repeated resume is delivered once. Writes go through the world's ``Journal``.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import msgspec

from worlds._flows.rows import HookHolder, HookRow
from worlds.memory.by_run import ByRun
from worlds.memory.journal import Journal
from worlds.types import HookRecord

__all__ = ["HookStore"]


class HookStore:
    """The memory world's hook tokens (``tokens``) and delivered resumes (``resumed``)."""

    def __init__(self, journal: Journal) -> None:
        """No tokens held, nothing resumed."""
        self._journal = journal
        self.tokens: ByRun[str, HookRecord] = ByRun(lambda hook: hook.run_id)
        self.resumed: dict[tuple[str, str], str] = {}

    def insert(self, hook: HookRow, now: datetime) -> bool:
        """Store ``hook`` unless someone holds its token."""
        if hook.token in self.tokens:
            return False
        record = HookRecord(
            token=hook.token,
            run_id=hook.run_id,
            hook=hook.hook,
            attributes=dict(hook.attributes),
            created_at=now,
        )
        self._journal.put(self.tokens, hook.token, record)
        return True

    def bind(self, hook: HookRow) -> bool:
        """Bind the token ``hook.run_id`` holds unbound to ``hook``."""
        held = self.tokens.get(hook.token)
        if held is None or held.run_id != hook.run_id or held.hook != 0:
            return False
        bound = msgspec.structs.replace(held, hook=hook.hook, attributes=dict(hook.attributes))
        self._journal.put(self.tokens, hook.token, bound)
        return True

    def load(self, record: HookRecord) -> None:
        """Store ``record`` as it is."""
        self._journal.put(self.tokens, record.token, record)

    def load_resume(self, token: str, resume_id: str, run_id: str) -> None:
        """Remember a delivery by its resume id."""
        self._journal.put(self.resumed, (token, resume_id), run_id)

    def holder(self, token: str) -> HookHolder | None:
        """Who holds ``token``."""
        held = self.tokens.get(token)
        return None if held is None else HookHolder(held.run_id, held.hook)

    def carry(self, old_run_id: str, new_run_id: str) -> None:
        """Hand ``old_run_id``'s tokens, unbound, and their resume ids to ``new_run_id``."""
        moved = self.tokens.of(old_run_id)
        for hook in moved:
            carried = msgspec.structs.replace(hook, run_id=new_run_id, hook=0)
            self._journal.put(self.tokens, hook.token, carried)
        tokens = {hook.token for hook in moved}
        for key, run_id in list(self.resumed.items()):
            if run_id == old_run_id and key[0] in tokens:
                self._journal.put(self.resumed, key, new_run_id)

    def dispose(self, run_id: str) -> None:
        """Free every token ``run_id`` holds."""
        for token in self.tokens.keys_of(run_id):
            self._journal.pop(self.tokens, token)

    def record_resume(self, token: str, resume_id: str, run_id: str) -> bool:
        """Record where the delivery went; False if one was recorded first."""
        if (token, resume_id) in self.resumed:
            return False
        self._journal.put(self.resumed, (token, resume_id), run_id)
        return True

    def forget_runs(self, run_ids: Collection[str]) -> None:
        """Forget the resumes delivered to the pruned ``run_ids``."""
        for key, run_id in list(self.resumed.items()):
            if run_id in run_ids:
                self._journal.pop(self.resumed, key)

    def list(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        hooks = list(self.tokens.values()) if run_id is None else self.tokens.of(run_id)
        return sorted(hooks, key=lambda hook: (hook.created_at, hook.run_id, hook.hook))
