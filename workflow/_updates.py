"""The ``Update`` handle that ``receive_updates(name)`` yields inside a workflow.

A caller outside sends an update with ``Run.update(name, payload)`` and waits
for the answer; the workflow body takes each update of ``name`` in log order
from ``async for update in receive_updates(name)`` and answers it once, with
``await update.reply(value)`` or ``await update.reject(message)``. Both answers
are recorded commands, so replay gives the same answer and a caller that asks
again (same update id) gets the one recorded. See ``rfcs/0021-updates.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflow._attributes import check_text
from workflow._codec import decode_result, encode_result

__all__ = ["Update", "check_update_name"]

_MAX_NAME = 256


def check_update_name(what: str, name: object) -> str:
    """``name`` (an update name or id) if every world can store it, else ``TypeError``
    or ``ValueError``: 1-256 characters of text."""
    if not isinstance(name, str):
        raise TypeError(f"the {what} must be a str, not {type(name).__name__}")
    if not 1 <= len(name) <= _MAX_NAME:
        raise ValueError(f"the {what} must be 1-{_MAX_NAME} characters, got {name!r}")
    return check_text(f"the {what}", name)


class Update:
    """One update a caller sent to this run, as ``receive_updates`` yields it.

    Attributes:
        name: the name it was sent to (``receive_updates(name)``).
        id: its update id: every caller with this id gets this update's answer.
        payload: what the caller sent (decoded).
    """

    __slots__ = ("_answer", "id", "name", "payload")

    def __init__(
        self,
        name: str,
        update_id: str,
        payload: bytes,
        answer: Callable[[str, bytes | None, str | None], None],
    ) -> None:
        self.name = name
        self.id = update_id
        self.payload: Any = decode_result(payload, None)
        self._answer = answer

    def __repr__(self) -> str:
        return f"Update(name={self.name!r}, id={self.id!r}, payload={self.payload!r})"

    async def reply(self, value: Any = None) -> None:
        """Answer the update with ``value``: its callers' ``Run.update`` returns it.

        Raises:
            RuntimeError: the update was answered already.
            TypeError: ``value`` cannot be recorded (nothing is recorded).
        """
        self._answer(self.id, encode_result(value, "the update's reply"), None)

    async def reject(self, message: str) -> None:
        """Refuse the update: its callers' ``Run.update`` raises ``UpdateRejectedError``
        with ``message``.

        Raises:
            RuntimeError: the update was answered already.
            TypeError / ValueError: ``message`` is not text a world can store.
        """
        if not isinstance(message, str):
            raise TypeError(f"a rejection message is a str, not {type(message).__name__}")
        self._answer(self.id, None, check_text("the rejection message", message))
