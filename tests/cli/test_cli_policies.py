"""``wf start --policy`` does exactly what ``workflow.policies`` does, for each holder state.

Each case puts a run holding ``order=o-1`` into one state (none, running,
completed, failed, cancelled), then runs ``wf start ... --unique order=o-1``
with a policy and compares the outcome with the library helper's, called
with the same options on an identical world.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

import worlds
from cli.main import app
from cli.start import POLICIES
from workflow import (
    AttributeConflictError,
    FatalError,
    RunAlreadyStartedError,
    Unique,
    Worker,
    find_run,
    start,
    workflow,
)
from workflow.policies import (
    ConflictPolicy,
    ReusePolicy,
    start_or_cancel_run,
    start_or_get_run,
    start_with_policy,
)

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.cli.test_cli_policies:cli_policy_flow"


@workflow
async def cli_policy_flow(outcome: str) -> str:
    if outcome == "fail":
        raise FatalError("asked to fail")
    return outcome


async def make_holder(url: str, state: str) -> str | None:
    """A run holding ``order=o-1`` in ``state``; its id."""
    if state == "none":
        return None
    async with worlds.open(url) as world:
        outcome = "fail" if state == "failed" else "done"
        run = await start(
            cli_policy_flow, outcome, attributes={"order": Unique("o-1")}, world=world
        )
        if state in ("completed", "failed"):
            async with Worker(world, [cli_policy_flow]):
                with anyio.fail_after(30):
                    while not (await run.status()).is_closed:
                        await anyio.sleep(0.02)
        elif state == "cancelled":
            await run.cancel("test", grace=None)
        assert (await run.status()).value == ("pending" if state == "running" else state)
        return run.id


async def outcome_of(url: str, holder: str | None, call: Any) -> tuple[str, int | None]:
    """("new" | "existing" | "error", the claim's generation) after ``call(world)``."""
    async with worlds.open(url) as world:
        try:
            run = await call(world)
        except (RunAlreadyStartedError, AttributeConflictError):
            kind = "error"
        else:
            kind = "existing" if run.id == holder else "new"
        claim = await (await holder_of(world)).claim("order") if kind != "error" else None
        return kind, claim.generation if claim is not None else None


async def holder_of(world: Any) -> Any:
    found = await find_run("order", "o-1", world=world)
    assert found is not None
    return found


def library_call(policy: str | None) -> Any:
    """The library call a CLI ``--policy`` stands for."""

    async def call(world: Any) -> Any:
        if policy is None:
            return await start(
                cli_policy_flow, "done", attributes={"order": Unique("o-1")}, world=world
            )
        helper = {"get": start_or_get_run, "cancel": start_or_cancel_run}.get(policy)
        if helper is not None:
            return await helper(cli_policy_flow, "done", key="order", value="o-1", world=world)
        return await start_with_policy(
            cli_policy_flow,
            "done",
            key="order",
            value="o-1",
            conflict=ConflictPolicy.FAIL,
            reuse=ReusePolicy.REJECT_DUPLICATE,
            error_when_already_started=True,
            world=world,
        )

    return call


def wf(*args: str) -> tuple[int, str]:
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(app, list(args), env={"WORKFLOW_WORLD": None})
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(result.output) from result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.output


EXPECTED = {
    # policy: outcome for a holder that is none, running, completed, failed, cancelled
    None: ["new", "error", "error", "error", "error"],
    "get": ["new", "existing", "existing", "existing", "existing"],
    "cancel": ["new", "new", "new", "new", "new"],
    "fail": ["new", "error", "error", "error", "error"],
}
STATES = ["none", "running", "completed", "failed", "cancelled"]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("policy", [None, "get", "cancel", "fail"])
def test_each_policy_against_each_holder_state(
    tmp_path: Path, policy: str | None, state: str
) -> None:
    cli_url = f"sqlite:///{tmp_path}/cli.db"
    lib_url = f"sqlite:///{tmp_path}/lib.db"
    cli_holder = anyio.run(make_holder, cli_url, state)
    lib_holder = anyio.run(make_holder, lib_url, state)

    args = ["start", TARGET, '"done"', "--unique", "order=o-1", "--json", "--world", cli_url]
    code, output = wf(*args, *(["--policy", policy] if policy else []))
    if code == 0:
        started = json.loads(output)
        kind = "existing" if started["id"] == cli_holder else "new"
        assert started["started"] is (kind == "new")
    else:
        assert code == 1, output
        assert "error:" in output
        kind = "error"

    async def generation() -> int | None:
        async with worlds.open(cli_url) as world:
            claim = await (await holder_of(world)).claim("order")
            return claim.generation if claim is not None else None

    cli_outcome = (kind, anyio.run(generation) if kind != "error" else None)
    lib_outcome = anyio.run(outcome_of, lib_url, lib_holder, library_call(policy))
    assert cli_outcome == lib_outcome
    assert kind == EXPECTED[policy][STATES.index(state)]


def test_the_policy_table_is_the_helpers_options() -> None:
    assert POLICIES["get"] == (ConflictPolicy.USE_EXISTING, ReusePolicy.REJECT_DUPLICATE, False)
    assert POLICIES["cancel"][:2] == (
        ConflictPolicy.TERMINATE_EXISTING,
        ReusePolicy.ALLOW_DUPLICATE,
    )
    assert POLICIES["fail"] == (ConflictPolicy.FAIL, ReusePolicy.REJECT_DUPLICATE, True)


@pytest.mark.parametrize(
    ("reuse", "state", "kind"),
    [
        ("allow-duplicate", "completed", "new"),
        ("allow-duplicate", "running", "error"),
        ("allow-duplicate-failed-only", "completed", "error"),
        ("allow-duplicate-failed-only", "failed", "new"),
    ],
)
def test_reuse_replaces_the_rule_for_a_closed_holder(
    tmp_path: Path, reuse: str, state: str, kind: str
) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    holder = anyio.run(make_holder, url, state)
    code, output = wf(
        "start", TARGET, '"done"', "--unique", "order=o-1", "--policy", "fail",
        "--reuse", reuse, "--json", "--world", url,
    )  # fmt: skip
    got = "error" if code == 1 else ("existing" if json.loads(output)["id"] == holder else "new")
    assert got == kind, output


@pytest.mark.parametrize(
    "args",
    [
        ["--attr", "a=1", "--attr", "a=2"],
        ["--attr", "a=1", "--attr", "a=1"],
        ["--attr", "order=x", "--unique", "order=o-1"],
        ["--unique", "order=o-1", "--unique", "order=o-2"],
        ["--unique", "order=o-1", "--reuse", "allow-duplicate"],
    ],
)
def test_a_key_given_twice_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    code, output = wf("start", TARGET, '"done"', *args, "--world", url)
    assert code == 2, output
    assert not (tmp_path / "w.db").exists()
