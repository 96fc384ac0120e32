"""Failure handlers: the run a failed run's ``@workflow(on_failure=...)`` starts.

The engine puts the handler (its workflow and encoded arguments) on the run's
``RunFailed`` command; the world starts the handler's run in the transaction
that stores that event. A run's log takes one closing event, so the handler
starts once per failed run, whatever crashes or retries happen around the
commit; its run id is derived from the failed run's id as well, so a failed
run retried (``Run.retry``) that fails again finds its handler already started
and starts no second one. The handler's run carries ``$on_failure_of`` (the
failed run's id), which is also how the engine knows a handler run: its own
failure starts no handler (no recursion).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from worlds._rules import runs
from worlds.types import AttributeValue, FailureHandler, RunCreated, RunRecord

__all__ = ["ON_FAILURE_OF_KEY", "handler_run", "handler_run_id"]

ON_FAILURE_OF_KEY = "$on_failure_of"
"""The attribute of a failure handler's run: the id of the run whose failure started it."""

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def handler_run_id(failed_run_id: str) -> str:
    """The run id of the failure handler of ``failed_run_id``: the same every time.

    Shaped like every run id (26 characters of Crockford base 32): the failed
    run's first 10 characters (its creation time, so the two sort together),
    then 80 bits drawn from its id.
    """
    digest = int.from_bytes(hashlib.sha256(f"{failed_run_id}/on_failure".encode()).digest()[:10])
    tail = []
    for _ in range(16):
        digest, digit = divmod(digest, 32)
        tail.append(_CROCKFORD[digit])
    head = "".join(c if c in _CROCKFORD else "0" for c in failed_run_id.upper()[:10]).ljust(10, "0")
    return head + "".join(reversed(tail))


def handler_run(
    failed_run_id: str, handler: FailureHandler, now: datetime
) -> tuple[RunRecord, RunCreated]:
    """The handler's new run and its ``RunCreated``: pending, due ``now``."""
    attributes: dict[str, AttributeValue] = {ON_FAILURE_OF_KEY: failed_run_id}
    run = runs.new_run(handler_run_id(failed_run_id), handler.workflow, attributes, now)
    return run, runs.created_event(handler.workflow, handler.args, attributes, now)
