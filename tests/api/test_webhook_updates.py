"""``HookEndpoints`` serving updates, called as an ASGI app, on every world: the reply
as JSON, ``Idempotency-Key`` as the update id, and a status for each refusal."""

from __future__ import annotations

import pytest

from tests.api.test_webhook_bodies import call
from tests.apps.updateapp import gatekeeper
from workflow import Worker, start
from workflow.webhooks import HookEndpoints
from worlds.protocol import World
from worlds.types import UpdateReceived

pytestmark = pytest.mark.anyio


async def test_updates_over_the_asgi_app(world: World) -> None:
    app = HookEndpoints(world)
    async with Worker(world, [gatekeeper]):
        run = await start(gatekeeper, world=world)
        path = f"/updates/{run.id}/enter"
        assert await call(app, path, b'"ada"', key="k-1") == (200, "welcome ada")
        assert await call(app, path, b'"bob"', key="k-1") == (200, "welcome ada")
        assert await call(app, path, b'"xia"') == (422, {"error": "xia may not enter"})
        assert (await call(app, path, b"NaN"))[0] == 400
        assert (await call(app, f"/updates/{run.id}/", b"1"))[0] == 400  # no name
        assert (await call(app, path, b"1", key=""))[0] == 400  # an empty update id
        assert (await call(app, path, b"1", method="GET"))[0] == 405
        assert (await call(app, "/updates/no-such-run/enter", b"1"))[0] == 404
        assert await call(app, path, b'"stop"') == (200, "stopped")
        await run.result(timeout=20)
    status, answer = await call(app, path, b'"eve"')
    assert status == 409 and "completed" in answer["error"]
    # k-1 once, xia, stop: refused requests delivered nothing
    received = [e for e in await run.events() if isinstance(e, UpdateReceived)]
    assert len(received) == 3 and received[0].update_id == "k-1"


def test_the_prefixes_may_not_overlap() -> None:
    with pytest.raises(ValueError):
        HookEndpoints(prefix="/x/", update_prefix="/x/")
    with pytest.raises(ValueError):
        HookEndpoints(update_prefix="updates")
