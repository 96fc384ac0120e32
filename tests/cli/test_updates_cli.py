"""``wf runs update``: send an update from a shell, print the workflow's reply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import worlds
from tests.apps.updateapp import gatekeeper
from tests.cli.test_cli import wf_in
from workflow import Worker, start
from worlds.types import UpdateReceived

pytestmark = pytest.mark.anyio


async def test_update_prints_the_reply_and_names_refusals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    async with worlds.open(url) as world:
        async with Worker(world, [gatekeeper]):
            run = await start(gatekeeper, world=world, attributes={"$name": "gate-1"})
            sent = await wf_in(url, "runs", "update", run.id, "enter", '"ada"', "--id", "r-1")
            assert sent.code == 0, sent.err
            assert json.loads(sent.out) == "welcome ada"
            # the same id again, by the run's $name: the recorded reply, delivered once
            again = await wf_in(url, "runs", "update", "gate-1", "enter", '"bob"', "--id", "r-1")
            assert again.code == 0 and json.loads(again.out) == "welcome ada"
            refused = await wf_in(url, "runs", "update", run.id, "enter", '"xavier"')
            assert refused.code == 1 and "xavier may not enter" in refused.err
            assert "Traceback" not in refused.err
            bad = await wf_in(url, "runs", "update", run.id, "enter", "{nope")
            assert bad.code == 2 and "PAYLOAD must be a JSON value" in bad.err
            empty = await wf_in(url, "runs", "update", run.id, "", "1")
            assert empty.code == 2
            stop = await wf_in(url, "runs", "update", run.id, "enter", '"stop"')
            assert stop.code == 0 and json.loads(stop.out) == "stopped"
            assert await run.result(timeout=30) == "stopped"
        closed = await wf_in(url, "runs", "update", run.id, "enter", '"eve"')
        assert closed.code == 1 and "completed" in closed.err
        listed = (await wf_in(url, "runs", "events", run.id)).out
        assert "update_received" in listed and 'update_id="r-1"' in listed
        assert "update_replied" in listed and "update_rejected" in listed
        shown = (await wf_in(url, "runs", "show", run.id)).out  # the timeline's summaries
        assert "update enter id r-1" in shown and "replied to update r-1" in shown
        assert "xavier may not enter" in shown
        received = [e for e in await run.events() if isinstance(e, UpdateReceived)]
        # r-1 once, "xavier", "stop": neither the retry nor the bad input delivered anything
        assert len(received) == 3 and received[0].update_id == "r-1"
