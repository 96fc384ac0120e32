"""``rate_limit()`` in workflow code: a durable wait for a token of a rate-limited pair.

A call issues a ``RateTokenRequested`` command. The world settles it in the
commit (``worlds._rules.rates.next_token``): it takes the pair's next token and
records its time in ``token_at`` (or ``refused``, when the pair is held at another
rate). The call then waits until then on a durable timer, so the run holds
no worker meanwhile. Replay answers the call from the recorded event and
replays the timer, so a token is taken once, however often the run replays.
"""

from __future__ import annotations

import asyncio

from workflow.engine._loop import WorkflowLoop
from workflow.engine._recorder import Recorder
from worlds.semantics import index_value
from worlds.types import AttributeValue, RateTokenRequested

__all__ = ["RateTokens"]


class RateTokens:
    """One run's ``rate_limit`` calls, numbered in call order."""

    def __init__(self, recorder: Recorder, loop: WorkflowLoop) -> None:
        self._recorder = recorder
        self._loop = loop
        self._next = 1

    async def take(self, key: str, value: AttributeValue, limit: int, per: float) -> None:
        """Wait until this run holds a token of (``key``, ``value``): at most ``limit``
        per sliding window of ``per`` seconds."""
        pair = (key, index_value(value))
        future: asyncio.Future[RateTokenRequested] = self._loop.create_future()
        requested = self._recorder.ask(
            f"rate_limit({key!r}, {value!r})",
            RateTokenRequested,
            RateTokenRequested,
            lambda: RateTokenRequested(
                number=self._next, key=key, value=value, limit=limit, per=per
            ),
            lambda recorded: (recorded.key, index_value(recorded.value)) == pair,
            future.set_result,
        )
        self._next = max(self._next, requested.number + 1)
        answered = await future
        if answered.refused is not None:
            raise ValueError(answered.refused)
        assert answered.token_at is not None, "the world records the token's time"
        wait = answered.token_at.timestamp() - self._loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
