"""Reuse windows and tombstones through the public API, on every world."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from workflow import (
    AttributeConflictError,
    RunNotFoundError,
    RunStatus,
    Unique,
    Worker,
    find_run,
    prune_runs,
    release_claims,
    set_attribute,
    start,
    step,
    workflow,
)
from workflow.policies import ConflictPolicy, ReusePolicy, start_with_policy
from worlds.protocol import World
from worlds.types import AttributeSet

pytestmark = pytest.mark.anyio


@step(max_retries=0)
async def deploy_step(sha: str, fail: bool) -> str:
    await set_attribute("charge", f"c-{sha}", unique=True, ttl=0)
    if fail:
        raise RuntimeError("deploy failed")
    return sha


@workflow
async def deploy(sha: str, fail: bool) -> str:
    await set_attribute("deploy", sha, unique=True, release_on={"failed"})
    return await deploy_step(sha, fail)


@workflow
async def plain(n: int) -> int:
    return n


def later() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=5)


async def test_release_on_in_a_workflow_frees_the_pair_when_the_run_fails(world: World) -> None:
    async with Worker(world, [deploy]):
        failed = await start(deploy, "s1", True, world=world)
        with anyio.fail_after(30):
            while not (await failed.status()).is_closed:
                await anyio.sleep(0.02)
        assert await failed.status() is RunStatus.FAILED
        assert await find_run("deploy", "s1", world=world) is None
        assert await find_run("charge", "c-s1", world=world) is None
        ok = await start(deploy, "s1", False, world=world)
        with anyio.fail_after(30):
            assert await ok.result() == "s1"
    holder = await find_run("deploy", "s1", world=world)
    assert holder is not None and holder.id == ok.id
    recorded = [e for e in await ok.events() if isinstance(e, AttributeSet) and e.key == "deploy"]
    assert recorded[0].release_on == {RunStatus.FAILED} and recorded[0].generation == 2


async def test_unique_with_a_ttl_lapses_after_the_holder_closed(world: World) -> None:
    first = await start(plain, 1, attributes={"order": Unique("o-1", ttl=2.0)}, world=world)
    await first.cancel()
    with pytest.raises(AttributeConflictError):
        await start(plain, 2, attributes={"order": Unique("o-1")}, world=world)
    with anyio.fail_after(15):
        while await find_run("order", "o-1", world=world) is not None:
            await anyio.sleep(0.05)
    second = await start(
        plain, 3, attributes={"order": Unique("o-1", ttl=timedelta(hours=24))}, world=world
    )
    (claim,) = await second.claims()
    assert claim.generation == 2 and claim.ttl == 24 * 3600


async def test_pruned_holders_keep_refusing_their_pairs(world: World) -> None:
    run = await start(plain, 1, attributes={"order": Unique("o-1")}, world=world)
    await run.cancel()
    assert await prune_runs(closed_before=later(), world=world) == [run.id]
    with pytest.raises(AttributeConflictError) as raised:
        await start(plain, 2, attributes={"order": Unique("o-1")}, world=world)
    assert raised.value.existing_run_id == run.id and raised.value.holder_pruned
    assert "pruned" in str(raised.value) and "release_claims=True" in str(raised.value)
    rejected = await start_with_policy(
        plain, 3, key="order", value="o-1", reuse=ReusePolicy.REJECT_DUPLICATE, world=world
    )
    assert rejected.id == run.id
    taken = await start_with_policy(
        plain, 4, key="order", value="o-1", conflict=ConflictPolicy.FAIL, world=world
    )
    assert taken.id != run.id  # ALLOW_DUPLICATE takes a closed (pruned) holder's claim over


async def test_release_claims_frees_the_pairs(world: World) -> None:
    run = await start(plain, 1, attributes={"order": Unique("o-1")}, world=world)
    await run.cancel()
    assert await prune_runs(closed_before=later(), release_claims=True, world=world) == [run.id]
    again = await start(plain, 2, attributes={"order": Unique("o-1")}, world=world)
    (claim,) = await again.claims()
    assert claim.generation == 2


async def test_a_later_release_prune_frees_the_tombstones_kept_before(world: World) -> None:
    """Issue 33, item 16: the refusal's advice works; a prune with ``release_claims=True``
    after one that kept tombstones releases them, though it prunes no run."""
    run = await start(plain, 1, attributes={"order": Unique("o-1")}, world=world)
    await run.cancel()
    assert await prune_runs(closed_before=later(), world=world) == [run.id]
    with pytest.raises(AttributeConflictError) as raised:
        await start(plain, 2, attributes={"order": Unique("o-1")}, world=world)
    assert "prune_runs(..., release_claims=True)" in str(raised.value)
    assert await prune_runs(closed_before=later(), release_claims=True, world=world) == []
    again = await start(plain, 3, attributes={"order": Unique("o-1")}, world=world)
    (claim,) = await again.claims()
    assert claim.generation == 2


async def test_release_claims_frees_a_tombstoned_or_closed_pair_only(world: World) -> None:
    """Issue 33, item 16: ``release_claims(key, value)`` is the way out of one tombstone
    (and of a closed holder's claim); an open holder keeps its pair, and bad input is
    refused before anything is written."""
    pruned = await start(plain, 1, attributes={"order": Unique("o-1")}, world=world)
    await pruned.cancel()
    await prune_runs(closed_before=later(), world=world)
    with pytest.raises(AttributeConflictError) as raised:
        await start(plain, 2, attributes={"order": Unique("o-1")}, world=world)
    assert "release_claims('order', 'o-1')" in str(raised.value)
    released = await release_claims("order", "o-1", world=world)
    assert released is not None
    assert (released.run_id, released.generation) == (pruned.id, 1)
    assert released.pruned_status == RunStatus.CANCELLED
    assert await release_claims("order", "o-1", world=world) is None  # free now
    again = await start(plain, 3, attributes={"order": Unique("o-1")}, world=world)
    assert [c.generation for c in await again.claims()] == [2]
    # an open holder keeps its pair
    with pytest.raises(AttributeConflictError) as refused:
        await release_claims("order", "o-1", world=world)
    assert refused.value.existing_run_id == again.id and "pending" in str(refused.value)
    assert (await find_run("order", "o-1", world=world)) == again
    # a closed (not pruned) holder's claim is released too
    await again.cancel()
    closed = await release_claims("order", "o-1", world=world)
    assert closed is not None and (closed.run_id, closed.pruned_status) == (again.id, None)
    assert await find_run("order", "o-1", world=world) is None
    assert await release_claims("order", "never-claimed", world=world) is None
    for key, value, error in [("", "v", ValueError), ("order", [1], TypeError)]:
        with pytest.raises(error):
            await release_claims(key, value, world=world)  # type: ignore[arg-type]


async def test_find_run_of_a_tombstone_says_the_run_was_pruned(world: World) -> None:
    """Issue 33, item 16: the handle ``find_run`` gives for a tombstone knows the run was
    pruned, and its methods say so instead of "no run"."""
    run = await start(plain, 1, attributes={"order": Unique("o-1")}, world=world)
    await run.cancel()
    live = await find_run("order", "o-1", world=world)
    assert live is not None and live.pruned_status is None
    await prune_runs(closed_before=later(), world=world)
    found = await find_run("order", "o-1", world=world)
    assert found is not None and found.id == run.id
    assert found.pruned_status == RunStatus.CANCELLED
    for call in (found.status, found.result, found.attributes):
        with pytest.raises(RunNotFoundError) as raised:
            await call()
        assert raised.value.pruned_status == RunStatus.CANCELLED
        assert raised.value.claim == ("order", "o-1")
        message = str(raised.value)
        assert "was pruned" in message and "release_claims('order', 'o-1')" in message
    await release_claims("order", "o-1", world=world)
    assert await find_run("order", "o-1", world=world) is None


async def test_bad_windows_are_refused_before_anything_is_written(world: World) -> None:
    bad = [
        (Unique("o", ttl=-1), ValueError),
        (Unique("o", release_on={"running"}), ValueError),
        (Unique("o", release_on="failed"), TypeError),
        (Unique("o", ttl="1h"), TypeError),  # type: ignore[arg-type]
    ]
    for marker, error in bad:
        with pytest.raises(error):
            await start(plain, 0, attributes={"order": marker}, world=world)
    with pytest.raises(TypeError):
        await prune_runs(closed_before=later(), release_claims="yes", world=world)  # type: ignore[call-overload]
    assert await find_run("order", "o", world=world) is None
