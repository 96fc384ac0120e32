"""Child runs on the engine side: their ids, and creating them before the parent commits.

A child start in workflow code becomes a ``ChildStarted`` command in the
parent's outbox, with the ``CreateRunRequest`` beside it. Before the worker
commits that outbox it creates each child (``create_children``); a refused
unique pair turns the command into a ``ChildConflict``. The child's run id is
a function of the parent's id and the child's number, so a worker that crashed
between creating the child and committing the parent's command creates
nothing the second time: the world answers that the run exists, and the
command is committed as it was meant to be.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from worlds.protocol import World
from worlds.types import ChildConflict, ChildStarted, CreateRunRequest, EventKind

__all__ = ["child_run_id", "create_children"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def child_run_id(parent_run_id: str, child: int, at_seconds: float) -> str:
    """The run id of child number ``child`` of ``parent_run_id``, started at ``at_seconds``.

    Shaped like every run id (26 characters that sort by creation time: 48 bits
    of milliseconds, then 80 bits drawn from the parent's id and the number),
    and the same on every replay.
    """
    millis = max(int(at_seconds * 1000), 0) & ((1 << 48) - 1)
    digest = hashlib.sha256(f"{parent_run_id}/child/{child}".encode()).digest()
    number = (millis << 80) | int.from_bytes(digest[:10], "big")
    chars = []
    for _ in range(26):
        number, digit = divmod(number, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


async def create_children(
    world: World, events: list[EventKind], requests: Mapping[int, CreateRunRequest]
) -> None:
    """Create the child run of every ``ChildStarted`` in ``events`` (an outbox);
    replace the command by a ``ChildConflict`` where a unique pair is held."""
    for index, event in enumerate(events):
        if not isinstance(event, ChildStarted):
            continue
        request = requests[event.child]
        try:
            created = await world.create_run(request)
        except ValueError:
            if await world.get_run(request.run_id) is None:
                raise
            continue  # created by an earlier try of this task that did not commit
        conflict = created.conflict
        if conflict is not None and conflict.holder_run_id != request.run_id:
            events[index] = ChildConflict(
                child=event.child,
                run_id=request.run_id,
                key=conflict.key,
                value=conflict.value,
                holder_run_id=conflict.holder_run_id,
            )
