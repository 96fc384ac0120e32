"""A workflow and a codec shared by a ``wf worker --codec`` process and its test."""

from __future__ import annotations

from workflow import create_hook, step, workflow

SECRET = "the-secret-card-4111"


class Reversing:
    """A deterministic codec (the same in every process): the bytes reversed, then xored."""

    def encode(self, data: bytes) -> bytes:
        return bytes(b ^ 0x33 for b in reversed(data))

    def decode(self, data: bytes) -> bytes:
        return bytes(b ^ 0x33 for b in data)[::-1]


@step
async def mask(card: str) -> str:
    return card[-4:]


@workflow
async def masked(card: str) -> str:
    return f"card ending {await mask(card)}"


@workflow
async def pinned(card: str) -> str:
    pin: str = await create_hook(f"pin-{card[-4:]}")
    return f"card ending {card[-4:]}, pin {pin}"
