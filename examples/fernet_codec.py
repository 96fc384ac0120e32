"""Encryption at rest: a payload codec with the ``cryptography`` package's Fernet.

    pip install cryptography
    python examples/fernet_codec.py

Every argument, result, hook payload and error message is encrypted before it
reaches the world; attributes stay in clear because the world indexes them.
Keep the key outside the database (an environment variable, a secret manager);
``MultiFernet`` rotates keys: new payloads use the first key, old ones still decrypt.
"""

from __future__ import annotations

import asyncio

from cryptography.fernet import Fernet, MultiFernet

import worlds
from workflow import Worker, start, step, workflow
from worlds.codec import CodecWorld


class FernetCodec:
    """A ``worlds.codec.PayloadCodec`` that encrypts with Fernet (AES-128-CBC + HMAC)."""

    def __init__(self, *keys: bytes) -> None:
        if not keys:
            raise ValueError("FernetCodec needs at least one key (Fernet.generate_key())")
        self._fernet = MultiFernet([Fernet(key) for key in keys])

    def encode(self, data: bytes) -> bytes:
        """Encrypt ``data`` with the first key."""
        return self._fernet.encrypt(data)

    def decode(self, data: bytes) -> bytes:
        """Decrypt ``data`` with whichever key made it (``InvalidToken`` if none did)."""
        return self._fernet.decrypt(data)


@step
async def look_up_card(customer: str) -> str:
    return f"4111-1111-1111-{len(customer):04d}"  # a secret the world must not hold in clear


@workflow
async def billing(customer: str) -> str:
    card = await look_up_card(customer)
    return f"charged card ending {card[-4:]}"


async def main() -> None:
    codec = FernetCodec(Fernet.generate_key())
    world = CodecWorld(worlds.open("sqlite:///.workflow/encrypted.db"), codec)
    async with world, Worker(world, [billing]):
        run = await start(billing, "alice@example.com", world=world)
        print(await run.result())
    async with world.inner as raw:  # the world without the codec: ciphertext only
        print((await raw.read_events(run.id))[0])


if __name__ == "__main__":
    asyncio.run(main())
