"""Group commit: what ``World.commit_many`` does with a batch, written once.

A batch is a list of independent ``CommitRequest``s. Each is applied as
``commit`` would apply it, in order, and gets its own outcome; a request that
``commit`` would refuse with an exception gets that exception as its outcome,
and nothing of it is written, while its neighbours are applied. A world that
can make the batch durable at once (one transaction, one fsync) does so, and
acknowledges nothing before then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from worlds.errors import WorldError, as_world_error
from worlds.types import CommitRequest, CommitResult

__all__ = ["Outcome", "check_batch", "is_world_failure", "one_by_one"]

Outcome = CommitResult | Exception
"""One request's outcome in a batch: its result, or the exception it raised."""


def check_batch(requests: Sequence[CommitRequest]) -> list[CommitRequest]:
    """The batch as a list, or ``TypeError`` (nothing written) if an entry is not a
    ``CommitRequest``."""
    batch = list(requests)
    for request in batch:
        if not isinstance(request, CommitRequest):
            raise TypeError(f"commit_many takes CommitRequests, got {request!r}")
    return batch


def is_world_failure(exc: Exception) -> bool:
    """Whether ``exc`` is the world failing (unavailable, misconfigured, closed),
    not the request: it fails the whole call, not one outcome."""
    return isinstance(as_world_error(exc), WorldError)


async def one_by_one(
    requests: Sequence[CommitRequest], commit: Callable[[CommitRequest], Awaitable[CommitResult]]
) -> list[Outcome]:
    """Each request committed alone, in order: the fallback of a world that cannot
    put a batch in one transaction. An exception a request raises is its outcome,
    except a world error (the world unavailable, misconfigured), which is raised."""
    outcomes: list[Outcome] = []
    for request in check_batch(requests):
        try:
            outcomes.append(await commit(request))
        except Exception as exc:
            if is_world_failure(exc):
                raise
            outcomes.append(exc)
    return outcomes
