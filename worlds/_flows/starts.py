"""Moving a pending run's start (``World.move_start``), for every backend.

In one transaction: the run (locked) and its workflow item are read and
``starts.refusal`` decides whether it may move; the new time is
``starts.new_start`` (with its rate-limited pairs' tokens, locked, when it has
any); its tokens move there if they must, its item becomes due then, and its
``RunCreated`` records the new start for people.
"""

from __future__ import annotations

from datetime import timedelta

from worlds._flows import rates
from worlds._flows.rows import Rows
from worlds._rules import starts
from worlds.protocol import work_topic
from worlds.semantics import workflow_item_id
from worlds.types import RunCreated, RunRecord

__all__ = ["move_start"]


async def move_start(rows: Rows, run_id: str, delay: float | None) -> RunRecord | None:
    """See ``World.move_start``: ``None`` for an unknown run; ``ValueError`` (nothing
    written) for one that started, or a slot waiter asked to be delayed."""
    run = await rows.get_run(run_id)
    if run is None:
        return None
    item_id = workflow_item_id(run_id)
    item = await rows.get_work(run_id, item_id)
    leased = item is not None and item.ever_leased
    why = starts.refusal(run, item is not None, leased, delaying=delay is not None)
    if why is not None:
        raise ValueError(why)
    if item is None:
        return run  # it waits for a slot: it starts when promoted
    own = [(pair, token) for pair, token, number in await rows.run_tokens(run_id) if number == 0]
    desired = rows.now + timedelta(seconds=delay or 0.0)
    others = []
    for pair, token in own:
        found = await rates.window(rows, pair, token.limit, token.per, desired, without=run_id)
        others.append((pair[0], found, token.limit, token.per))
    own_at = own[0][1].at if own else None
    at = starts.new_start(own_at, others, desired, rows.now)
    if at != own_at:
        created = (await rows.events(run_id))[0]
        assert isinstance(created, RunCreated), "a run's log starts with RunCreated"
        for pair, token in own:
            await rows.drop_token(pair, run_id, 0)
            moved = token._replace(at=at)
            await rows.insert_token(pair, 0, moved, created.priority)
    await rates.retime(rows, run_id, at, admitted=bool(own))
    rows.signal(work_topic(run.workflow))
    return run
