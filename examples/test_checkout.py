"""Tests of the README's checkout workflow (examples/checkout.py) with ``workflow.testing``.

The testing guide (docs/guides/testing.md) shows this file whole; the suite runs it.
"""

from datetime import timedelta

import pytest

from examples.checkout import charge, checkout, receipts
from workflow import Unique, find_run
from workflow.testing import TestEnvironment

pytestmark = pytest.mark.anyio  # or pytest-asyncio: the kit only needs a running event loop


async def fake_charge(order_id: str, cents: int) -> str:
    return f"test-payment-{order_id}-{cents}"


async def test_checkout_charges_then_sends_the_receipt_an_hour_later() -> None:
    async with TestEnvironment(workflows=[checkout], steps={charge: fake_charge}) as env:
        started = env.now()
        run = await env.start(checkout, "o-1", 1999, attributes={"order": Unique("o-1")})
        assert await run.result() == "test-payment-o-1-1999"  # the hour passes at once
        assert env.now() - started >= timedelta(hours=1)
        assert (await run.attributes())["stage"] == "paid"
        assert "o-1" in receipts
        assert await find_run("order", "o-1", world=env.world) == run


async def test_the_receipt_waits_for_the_clock(workflow_env: TestEnvironment) -> None:
    # the workflow_env fixture: an open TestEnvironment; here the clock is driven by hand
    workflow_env.skip_time = False
    receipts.clear()  # module state: anyio runs each test on every backend installed (trio too)
    run = await workflow_env.start(checkout, "o-2", 500)
    await workflow_env.advance(timedelta(minutes=59))
    assert "o-2" not in receipts
    await workflow_env.advance(timedelta(minutes=1))
    assert (await run.result()).startswith("pay-")  # the real charge step ran
    assert "o-2" in receipts
