"""``wf`` and flow control: why a pending run waits, a pair's holders, pruning with tombstones."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

import worlds
from tests.api.test_hold import gate_keeper, gate_user
from tests.cli.test_cli import wf, wf_here, wf_in
from workflow import Limited, Unique, Worker, find_run, start, workflow

pytestmark = pytest.mark.anyio


@workflow
async def cli_flow_job(n: int) -> int:
    return n


@dataclass
class Line:
    """Four pending runs of ``cli_flow_job`` sharing a ``tenant=acme`` limit of 2."""

    url: str
    runs: list[str]


@pytest.fixture(scope="module")
def line(tmp_path_factory: pytest.TempPathFactory) -> Line:
    """Built once: the tests below only read it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('line') / 'w.db'}"

    async def populate() -> list[str]:
        async with worlds.open(url) as world:
            attributes = {"tenant": Limited("acme", 2)}
            return [
                (await start(cli_flow_job, n, attributes=attributes, world=world)).id
                for n in range(4)
            ]

    return Line(url, anyio.run(populate))


def test_show_says_why_a_pending_run_waits(line: Line) -> None:
    url, runs = line.url, line.runs
    shown = wf_here(url, "runs", "show", runs[3])
    assert shown.code == 0, shown.err
    assert "waiting for tenant=acme: 2 of 2 slots held by" in shown.out
    assert runs[0] in shown.out and "(1 ahead in line)" in shown.out
    document = wf_here(url, "runs", "show", runs[2], "--json").json()
    (waiting,) = document["waiting"]
    assert waiting["holders"] == [runs[0], runs[1]] and waiting["ahead"] == 0
    assert wf_here(url, "runs", "show", runs[0], "--json").json()["waiting"] == []


def test_the_runs_in_line_are_listed_as_pending(line: Line) -> None:
    listed = wf_here(line.url, "runs", "list", "--query", "status = 'pending'", "--json").json()
    assert len(listed["runs"]) == 4


def test_holders_lists_the_line(line: Line) -> None:
    url, runs = line.url, line.runs
    holders = wf_here(url, "attributes", "holders", "tenant", "acme", "--json").json()
    assert holders["limit"] == 2
    assert holders["holders"] == [runs[0], runs[1]]
    assert holders["waiters"] == [runs[2], runs[3]]
    table = wf(url, "attributes", "holders", "tenant", "acme")
    assert "2 of 2 slots held" in table.out and "waiting" in table.out
    assert "nobody holds" in wf_here(url, "attributes", "holders", "tenant", "none").out


async def test_prune_keeps_tombstones_unless_asked_to_release(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        run = await start(cli_flow_job, 1, attributes={"order": Unique("o-1")}, world=world)
        await run.cancel("done with it")
    later = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    assert (await wf_in(url, "runs", "prune", "--before", later)).code == 0
    holders = (await wf_in(url, "attributes", "holders", "order", "o-1", "--json")).json()
    assert holders["claim"]["run_id"] == run.id
    assert holders["claim"]["pruned_status"] == "cancelled"
    assert "pruned (cancelled)" in (await wf_in(url, "attributes", "holders", "order", "o-1")).out
    # issue 33, item 16: a later prune with --release-claims frees the tombstone too
    assert (await wf_in(url, "runs", "prune", "--before", later, "--release-claims")).code == 0
    assert (await wf_in(url, "attributes", "holders", "order", "o-1", "--json")).json()[
        "claim"
    ] is None
    async with worlds.open(url) as world:
        again = await start(cli_flow_job, 2, attributes={"order": Unique("o-2")}, world=world)
        await again.cancel()
    later = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    assert (await wf_in(url, "runs", "prune", "--before", later, "--release-claims")).code == 0
    assert (await wf_in(url, "attributes", "holders", "order", "o-2", "--json")).json()[
        "claim"
    ] is None


def test_start_with_limit_and_delay(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    target = "tests.cli.test_cli_flow:cli_flow_job"
    ids = []
    for n in range(2):
        started = wf_here(url, "start", target, str(n), "--limit", "lane=l-1:1", "--delay", "60")
        assert started.code == 0, started.err
        ids.append(started.out.strip())
    holders = wf_here(url, "attributes", "holders", "lane", "l-1", "--json").json()
    assert (holders["limit"], holders["holders"], holders["waiters"]) == (1, ids[:1], ids[1:])
    for bad in ("lane=l-1", "lane=l-1:0", "lane=l-1:x"):
        refused = wf_here(url, "start", target, "0", "--limit", bad)
        assert refused.code == 2 and "--limit takes KEY=VALUE:N" in refused.err
    twice = wf_here(url, "start", target, "0", "--attr", "lane=x", "--limit", "lane=l-1:1")
    assert twice.code == 2 and "given twice" in twice.err


async def test_hold_blocks_show_in_holders_and_runs_show(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        async with Worker(world, [gate_keeper, gate_user]):
            keeper = await start(gate_keeper, "cli-token", world=world)
            user = await start(gate_user, "cli", world=world)
            with anyio.fail_after(30):
                while len(await world.list_slots("gate", "g")) < 2:
                    await anyio.sleep(0.02)
                rows = await world.list_slots("gate", "g")
                while [row.holding for row in rows] != [True, False]:
                    await anyio.sleep(0.02)
                    rows = await world.list_slots("gate", "g")
        holder, waiter = rows[0].run_id, rows[1].run_id
        assert {holder, waiter} == {keeper.id, user.id}
    holders = (await wf_in(url, "attributes", "holders", "gate", "g", "--json")).json()
    assert (holders["limit"], holders["holders"], holders["waiters"]) == (1, [holder], [waiter])
    assert holders["holds"] == {holder: 1, waiter: 1}
    table = await wf_in(url, "attributes", "holders", "gate", "g")
    assert "holding (hold 1)" in table.out and "waiting (hold 1)" in table.out
    shown = await wf_in(url, "runs", "show", waiter)
    assert shown.code == 0, shown.err
    assert f"waiting for gate=g (hold 1): 1 of 1 slots held by {holder}" in shown.out
    assert "hold 1 gate=g limit 1: waiting" in shown.out
    (waiting,) = (await wf_in(url, "runs", "show", waiter, "--json")).json()["waiting"]
    assert (waiting["hold"], waiting["holders"]) == (1, [holder])


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_attributes_release_frees_a_tombstone(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 33, item 16: ``wf attributes release KEY VALUE`` is the way out of a
    tombstone; an open holder keeps its pair (exit 1, saying why)."""
    if kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        run = await start(cli_flow_job, 1, attributes={"order": Unique("o-1")}, world=world)
        await run.cancel()
        live = await start(cli_flow_job, 2, attributes={"order": Unique("o-2")}, world=world)
    later = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    assert (await wf_in(url, "runs", "prune", "--before", later)).code == 0
    refused = await wf_in(
        url, "start", "tests.cli.test_cli_flow:cli_flow_job", "3", "--unique", "order=o-1"
    )
    assert refused.code == 1 and "wf attributes release" in refused.err, refused.err
    shown = await wf_in(url, "runs", "show", "order=o-1")
    assert shown.code == 1 and f"run {run.id!r} was pruned (it had closed as cancelled)" in (
        shown.err
    ), shown.err
    released = wf(url, "attributes", "release", "order", "o-1")
    assert released.code == 0, released.err
    assert f"held by pruned run {run.id} (cancelled), generation 1" in released.out
    again = (await wf_in(url, "attributes", "release", "order", "o-1", "--json")).json()
    assert again == {"key": "order", "value": "o-1", "released": None}
    kept = await wf_in(url, "attributes", "release", "order", "o-2")
    assert kept.code == 1 and live.id in kept.err and "pending" in kept.err, kept.err
    async with worlds.open(url) as world:
        holder = await find_run("order", "o-2", world=world)
        assert holder == live
        taken = await start(cli_flow_job, 3, attributes={"order": Unique("o-1")}, world=world)
        assert [claim.generation for claim in await taken.claims()] == [2]


def test_start_with_priority_is_shown_and_orders_the_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    target = "tests.cli.test_cli_flow:cli_flow_job"
    ids = []
    for n, priority in enumerate(("0", "5", "-2")):
        started = wf_here(
            url, "start", target, str(n), "--limit", "lane=p:1", "--priority", priority
        )
        assert started.code == 0, started.err
        ids.append(started.out.strip())
    holders = wf_here(url, "attributes", "holders", "lane", "p", "--json").json()
    assert (holders["holders"], holders["waiters"]) == (ids[:1], [ids[2], ids[1]])
    shown = wf_here(url, "runs", "show", ids[2])
    assert "priority -2" in shown.out and "ahead in line" not in shown.out
    assert "1 ahead in line" in wf_here(url, "runs", "show", ids[1]).out
    assert wf_here(url, "runs", "show", ids[2], "--json").json()["priority"] == -2
    refused = wf_here(url, "start", target, "0", "--priority", "high")
    assert refused.code == 2


async def test_runs_show_says_a_rate_limited_run_waits_for_its_token(tmp_path: Path) -> None:
    from workflow import RateLimited

    url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        rate = RateLimited("c-9", 1, per=3600)
        await start(cli_flow_job, 0, attributes={"customer": rate}, world=world)
        waiting = await start(cli_flow_job, 1, attributes={"customer": rate}, world=world)
    shown = await wf_in(url, "runs", "show", waiting.id)
    assert "rate limited by customer=" in shown.out and "c-9" in shown.out
