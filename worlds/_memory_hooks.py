"""Hook tokens of the memory world: who holds each token, and the resumes already delivered.

A token is held by one run at a time; a run's unbound tokens (``hook=0``) were
delivered to before the run created its hook, or carried over by
continue-as-new. ``resumed`` remembers where each ``(token, resume_id)`` went so a
repeated resume is delivered once.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import msgspec

from worlds.semantics import carried_payloads
from worlds.types import (
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    HookRecord,
    RunContinued,
)

__all__ = ["HookStore"]


class HookStore:
    """The memory world's hook tokens (``tokens``) and delivered resumes (``resumed``)."""

    def __init__(self) -> None:
        """No tokens held, nothing resumed."""
        self.tokens: dict[str, HookRecord] = {}
        self.resumed: dict[tuple[str, str], str] = {}

    def carry(
        self, old_run_id: str, old_events: list[EventKind], new_run_id: str, event: RunContinued
    ) -> list[HookReceived]:
        """Hand ``old_run_id``'s tokens, unbound, to ``new_run_id``.

        Returns:
            The unread payloads the new run receives, for the caller to append.
        """
        held = [hook for hook in self.tokens.values() if hook.run_id == old_run_id]
        carried = list(carried_payloads(old_events, held, event))
        for hook in held:
            self.tokens[hook.token] = msgspec.structs.replace(hook, run_id=new_run_id, hook=0)
        tokens = {hook.token for hook in held}
        for key, run_id in self.resumed.items():
            if run_id == old_run_id and key[0] in tokens:
                self.resumed[key] = new_run_id
        return carried

    def dispose(self, run_id: str) -> None:
        """Free every token ``run_id`` holds."""
        for token in [t for t, hook in self.tokens.items() if hook.run_id == run_id]:
            del self.tokens[token]

    def try_bind(self, run_id: str, event: HookCreated, now: datetime) -> EventKind:
        """Bind ``event``'s token to the run, or the ``HookConflict`` if another holds it."""
        held = self.tokens.get(event.token)
        if held is not None and held.run_id == run_id and held.hook == 0:
            self.tokens[event.token] = msgspec.structs.replace(
                held, hook=event.hook, attributes=dict(event.attributes)
            )
            return event
        if held is not None:
            return HookConflict(hook=event.hook, token=event.token, holder_run_id=held.run_id)
        self.tokens[event.token] = HookRecord(
            token=event.token,
            run_id=run_id,
            hook=event.hook,
            attributes=dict(event.attributes),
            created_at=now,
        )
        return event

    def list(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        hooks = [h for h in self.tokens.values() if run_id is None or h.run_id == run_id]
        return sorted(hooks, key=lambda hook: (hook.created_at, hook.run_id, hook.hook))

    def forget_runs(self, run_ids: Collection[str]) -> None:
        """Forget the resumes delivered to the pruned ``run_ids``."""
        self.resumed = {k: r for k, r in self.resumed.items() if r not in run_ids}
