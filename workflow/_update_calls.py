"""Sending an update from outside a run and waiting for the workflow's answer.

``Run.update`` and ``update_with_start`` send the update in one world
operation (``World.send_update``, ``World.update_with_start``) and then wait
here: on the run's topic, which a commit holding an answer (or the run's
close) signals, re-reading the outcome from the world at least every
``POLL_SECONDS`` (another SQLite process's signals do not reach this one). The
answer is read from the run's log, so a caller that retries with the same
update id, in this process or any other, gets the same one.
"""

from __future__ import annotations

import math
from typing import Any
from uuid import uuid4

import anyio

from workflow import _runtime
from workflow._codec import decode_result, encode_result
from workflow._updates import check_update_name
from workflow.errors import NotInWorkflowError, UpdateFailedError, UpdateRejectedError
from worlds.codec import codec_required
from worlds.errors import CodecRequiredError
from worlds.protocol import World, run_topic
from worlds.types import UpdateDelivery, UpdateOutcome

__all__ = ["POLL_SECONDS", "await_answer", "new_delivery", "send_update"]

POLL_SECONDS = 1.0
"""Longest wait between two reads of a pending update's outcome."""


def new_delivery(name: str, payload: Any, update_id: str | None) -> UpdateDelivery:
    """The update to send, checked and encoded (a fresh id when ``update_id`` is None).

    Raises:
        NotInWorkflowError: called from workflow code (it waits on another run).
        TypeError / ValueError: a bad name, id or payload; nothing is sent.
    """
    runtime = _runtime.current_or_none()
    if runtime is not None and runtime.in_workflow:
        raise NotInWorkflowError(
            "updates are sent from outside workflows (a client, a step): workflow code "
            "cannot wait on another run's answer"
        )
    return UpdateDelivery(
        name=check_update_name("update name", name),
        update_id=uuid4().hex if update_id is None else check_update_name("update id", update_id),
        payload=encode_result(payload, "the update payload"),
    )


async def send_update(
    world: World,
    run_id: str,
    name: str,
    payload: Any,
    update_id: str | None,
    timeout: float | None,
) -> Any:
    """See ``Run.update``."""
    delivery = new_delivery(name, payload, update_id)
    outcome = await world.send_update(run_id, delivery)
    return await await_answer(world, outcome, delivery, timeout)


async def await_answer(
    world: World, outcome: UpdateOutcome, delivery: UpdateDelivery, timeout: float | None
) -> Any:
    """Wait until ``outcome`` (of ``delivery``) is decided; the reply, or the error."""
    deadline = math.inf if timeout is None else anyio.current_time() + timeout
    while outcome.state == "pending":
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            raise TimeoutError(
                f"update {delivery.name!r} ({delivery.update_id}) of run {outcome.run_id} "
                f"got no answer within {timeout} s (it stays delivered: ask again with "
                "the same update_id for its answer)"
            )
        await world.wait(run_topic(outcome.run_id), min(remaining, POLL_SECONDS))
        found = await world.update_outcome(outcome.run_id, delivery.update_id)
        if found is None:  # the run was pruned while we waited
            found = UpdateOutcome(
                run_id=outcome.run_id, state="failed", message=f"run {outcome.run_id} was pruned"
            )
        outcome = found
    name, update_id, run_id = delivery.name, delivery.update_id, outcome.run_id
    if outcome.state == "replied":
        assert outcome.result is not None
        try:
            return decode_result(outcome.result, None)
        except CodecRequiredError:
            raise await codec_required(world) from None
    if outcome.state == "rejected":
        raise UpdateRejectedError(run_id, name, update_id, outcome.message or "")
    raise UpdateFailedError(run_id, name, update_id, outcome.message or "no answer")
