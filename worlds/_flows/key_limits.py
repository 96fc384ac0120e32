"""Setting a key limit (``World.set_key_limit``), for every backend.

In one transaction: the key is locked (``Rows.key_row``), its limit stored or
removed, and whom the change admits is promoted: a raised limit has room for
the key's chosen waiters, a removed one leaves each value's first waiter with
its pair's limit alone (``slots.promote`` over the key's own line and every
value waiting in it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worlds._flows import keys as keys_flow
from worlds._flows import slots
from worlds._flows.rows import Rows
from worlds._flows.tx import Tx
from worlds._rules import key_limits
from worlds.types import KeyLimit

__all__ = ["check", "set_key_limit"]


def check(key: str, limit: int | None, weights: Mapping[Any, float] | None) -> KeyLimit | None:
    """The key limit ``set_key_limit`` stores (``None``: it removes one); ``ValueError`` or
    ``TypeError`` for input no world keeps (``key_limits.check_key_limit``), so a world
    calls it before its transaction and bad input writes nothing."""
    return key_limits.check_key_limit(key, limit, weights)


async def set_key_limit(rows: Rows, key: str, limit: KeyLimit | None) -> KeyLimit | None:
    """See ``World.set_key_limit``: store ``limit`` (checked) for ``key`` (``None``: remove
    it, with the values' shares) and promote the runs that admits; the limit stored."""
    tx = Tx(rows)
    if limit is None:  # either locks the key before its waiters are read
        await rows.drop_key_limit(key)
    else:
        await rows.put_key_limit(limit)
        await keys_flow.enter_all(tx, key)
    waiting = [(key, c.ivalue) for c in await rows.key_waiting(key)]
    await slots.promote(tx, [key_limits.key_pair(key), *waiting])
    return limit
