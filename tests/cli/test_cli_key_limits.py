"""``wf attributes limit``, and ``wf runs show`` / the UI saying why a run waits."""

from __future__ import annotations

from pathlib import Path

import pytest

import worlds
from tests.cli.test_cli import wf_in
from workflow import Limited, RateLimited, get_key_limit, start, workflow

pytestmark = pytest.mark.anyio


@workflow
async def cli_key_job(n: int) -> int:
    return n


async def test_limit_sets_shows_and_removes_a_key_limit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    set_it = await wf_in(url, "attributes", "limit", "tenant", "3", "--weight", "acme=2")
    assert set_it.code == 0, set_it.err
    assert "key limit of tenant set to 3 (weights: acme=2)" in set_it.out
    async with worlds.open(url) as world:
        found = await get_key_limit("tenant", world=world)
        assert found is not None and found == 3 and dict(found.weights) == {"acme": 2.0}
    shown = (await wf_in(url, "attributes", "limit", "tenant", "--json")).json()
    assert shown["key_limit"] == {"limit": 3, "weights": [["acme", 2.0]], "held": 0}
    bad = await wf_in(url, "attributes", "limit", "tenant", "0")
    assert bad.code == 2 and "1-1000000" in bad.err
    assert (await wf_in(url, "attributes", "limit", "tenant", "-w", "acme")).code == 2
    removed = await wf_in(url, "attributes", "limit", "tenant", "--remove")
    assert removed.code == 0 and "no key limit (removed)" in removed.out
    assert "tenant: no key limit" in (await wf_in(url, "attributes", "limit", "tenant")).out


async def test_runs_show_says_a_run_waits_for_a_key_slot(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        assert (await wf_in(url, "attributes", "limit", "tenant", "2")).code == 0
        await start(cli_key_job, 0, attributes={"tenant": Limited("acme", 5)}, world=world)
        await start(cli_key_job, 1, attributes={"tenant": Limited("globex", 5)}, world=world)
        waiting = await start(
            cli_key_job, 2, attributes={"tenant": Limited("acme", 5)}, world=world
        )
    shown = await wf_in(url, "runs", "show", waiting.id)
    assert shown.code == 0, shown.err
    assert "waiting for a tenant slot: 2 of 2 held, acme has 1" in shown.out
    document = (await wf_in(url, "runs", "show", waiting.id, "--json")).json()
    (wait,) = document["waiting"]
    assert (wait["key_limit"], wait["key_held"]) == (2, 2)
    holders = await wf_in(url, "attributes", "holders", "tenant", "acme")
    assert "key tenant: 2 of 2 slots held over all its values" in holders.out


async def test_runs_show_gives_a_rate_limited_runs_rate_and_next_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        rate = RateLimited("c-9", 10, per=60)
        for n in range(10):
            await start(cli_key_job, n, attributes={"customer": rate}, world=world)
        waiting = await start(cli_key_job, 10, attributes={"customer": rate}, world=world)
    shown = await wf_in(url, "runs", "show", waiting.id)
    assert "rate limited by customer=c-9: 10 per 60 s, next token in " in shown.out
