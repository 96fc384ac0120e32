"""``wf`` against an SQLite world populated by real runs.

Every command is run at least once as the real entry point, in a subprocess (:func:`wf`);
the other calls of a test run it in process (:func:`wf_here`).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

import worlds
from cli.main import app
from examples.quickstart import checkout
from workflow import Unique, Worker, start

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def wf(url: str | None, *args: str) -> Result:
    """Run ``python -m cli ARGS --world URL`` (no ``--world`` if ``url`` is None) from
    the repository root."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("WORKFLOW_WORLD", None)
    done = subprocess.run(
        [sys.executable, "-m", "cli", *args, *(["--world", url] if url is not None else [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return Result(done.returncode, done.stdout, done.stderr)


def wf_here(url: str, *args: str, columns: int = 200) -> Result:
    """Run ``wf ARGS --world URL`` in this process, from the repository root.

    For the calls whose subject is not the process boundary: each command keeps a test
    that goes through :func:`wf`.
    """
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        done = CliRunner().invoke(
            app, [*args, "--world", url], env={"COLUMNS": str(columns), "WORKFLOW_WORLD": None}
        )
    finally:
        os.chdir(before)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise AssertionError(done.output) from done.exception
    assert "Traceback" not in done.stderr, done.stderr
    return Result(done.exit_code, done.stdout, done.stderr)


async def wf_in(url: str, *args: str) -> Result:
    """:func:`wf_here` from an async test: on a thread, as the command runs its own loop."""
    return await anyio.to_thread.run_sync(functools.partial(wf_here, url, *args))


@dataclass
class World:
    url: str
    done: list[str]
    pending: list[str]


async def populate(url: str) -> tuple[list[str], list[str]]:
    """Three completed checkouts (one named), two pending ones."""
    world = worlds.open(url)
    async with world:
        done = []
        async with Worker(world, [checkout]):
            for n, customer in enumerate(["c-1", "c-2", "c-1"]):
                attributes: dict[str, Any] = {"order": Unique(f"o-{n}"), "customer": customer}
                if n == 0:
                    attributes["$name"] = "first-order"
                run = await start(
                    checkout, f"o-{n}", n + 1, 100 * n, attributes=attributes, world=world
                )
                await run.result(timeout=30)
                done.append(run.id)
        pending = []
        for n in (3, 4):
            attributes = {"order": Unique(f"o-{n}"), "customer": "c-3", "tier": n}
            pending.append(
                (await start(checkout, f"o-{n}", 1, 1, attributes=attributes, world=world)).id
            )
    return done, pending


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'world.db'}"
    done, pending = anyio.run(populate, url)
    return World(url, done, pending)


def test_runs_list_json(world: World) -> None:
    result = wf(world.url, "runs", "list", "--json")
    assert result.code == 0, result.err
    page = result.json()
    assert page["next_cursor"] is None
    runs = page["runs"]
    assert [run["id"] for run in runs] == (world.done + world.pending)[::-1]
    for run in runs:
        assert {"id", "workflow", "status", "created_at", "closed_at", "attributes"} <= set(run)
        assert run["workflow"] == "checkout"
    by_id = {run["id"]: run for run in runs}
    assert by_id[world.done[0]]["status"] == "completed"
    assert by_id[world.done[0]]["attributes"]["$name"] == "first-order"
    assert by_id[world.done[0]]["closed_at"] is not None
    assert by_id[world.pending[0]]["attributes"]["tier"] == 3
    # results stay out of a listing; wf runs show prints them
    assert by_id[world.done[0]]["has_result"] is True and "result" not in by_id[world.done[0]]
    assert by_id[world.pending[0]]["has_result"] is False


@pytest.mark.parametrize(
    ("args", "pick"),
    [
        (["--status", "pending"], lambda w: w.pending[::-1]),
        (["--status", "completed", "--attr", "customer=c-1"], lambda w: [w.done[2], w.done[0]]),
        (["--attr", "tier=4"], lambda w: [w.pending[1]]),
        (["--attr", 'tier="4"'], lambda w: []),
        (["--query", "tier >= 3 AND customer STARTS_WITH 'c-'"], lambda w: w.pending[::-1]),
        (
            ["--query", "closed_at IS NULL OR `$name` = 'first-order'"],
            lambda w: [*w.pending[::-1], w.done[0]],
        ),
        (["--workflow", "nope"], lambda w: []),
        (["--since", "1h", "--limit", "1"], lambda w: [w.pending[1]]),
        (["--until", "1h"], lambda w: []),
    ],
)
def test_runs_list_filters(world: World, args: list[str], pick: Any) -> None:
    result = wf_here(world.url, "runs", "list", *args, "--json")
    assert result.code == 0, result.err
    assert [run["id"] for run in result.json()["runs"]] == pick(world)


def test_runs_list_pages_with_a_cursor(world: World) -> None:
    first = wf_here(world.url, "runs", "list", "--limit", "3")
    assert "--cursor" in first.err
    cursor = first.err.split("--cursor", 1)[1].split()[0]
    rest = wf_here(world.url, "runs", "list", "--limit", "3", "--cursor", cursor, "--json")
    ids = [run["id"] for run in rest.json()["runs"]]
    assert ids == (world.done + world.pending)[::-1][3:]


def test_runs_list_json_pages_from_stdout_alone(world: World) -> None:
    ids: list[str] = []
    cursor: list[str] = []
    while True:
        page = wf_here(world.url, "runs", "list", "--limit", "2", "--json", *cursor)
        assert page.code == 0 and page.err == "", page.err
        ids += [run["id"] for run in page.json()["runs"]]
        if page.json()["next_cursor"] is None:
            break
        cursor = ["--cursor", page.json()["next_cursor"]]
    assert ids == (world.done + world.pending)[::-1]


@pytest.mark.parametrize(
    ("attrs", "pick"),
    [
        (["customer=c-1", "customer=c-2"], lambda w: []),
        (["customer=c-1", "customer=c-1"], lambda w: [w.done[2], w.done[0]]),
        (["customer=c-3", "tier=3", "customer=c-3"], lambda w: [w.pending[0]]),
    ],
)
def test_the_same_attr_twice_means_both(world: World, attrs: list[str], pick: Any) -> None:
    args = [part for attr in attrs for part in ("--attr", attr)]
    result = wf_here(world.url, "runs", "list", *args, "--json")
    assert result.code == 0, result.err
    assert [run["id"] for run in result.json()["runs"]] == pick(world)


def test_runs_list_table(world: World) -> None:
    result = wf_here(world.url, "runs", "list")
    assert result.code == 0
    assert "STATUS" in result.out and "customer=c-3" in result.out and world.done[0] in result.out


def test_a_malformed_query_exits_2_with_a_caret(world: World) -> None:
    result = wf_here(world.url, "runs", "list", "--query", "tier >= AND x = 1")
    assert result.code == 2
    assert "position 8" in result.err
    lines = result.err.splitlines()
    caret = next(line for line in lines if line.strip() == "^")
    query_line = lines[lines.index(caret) - 1]
    assert query_line.index("tier") + 8 == caret.index("^")


@pytest.mark.parametrize("spec", ["id", "first-order", "$name=first-order", "order=o-0"])
def test_runs_show_resolves_every_run_spelling(world: World, spec: str) -> None:
    target = world.done[0]
    result = wf_here(world.url, "runs", "show", target if spec == "id" else spec, "--json")
    assert result.code == 0, result.err
    details = result.json()
    assert details["run"]["id"] == target
    assert details["run"]["status"] == "completed"
    assert details["claims"]["order"] == {"value": "o-0", "generation": 1}
    assert details["claims"]["$name"]["generation"] == 1
    steps = details["steps"]
    assert [step["name"] for step in steps] == ["reserve_stock", "charge_card", "send_receipt"]
    assert all(step["status"] == "completed" and step["attempts"] == 1 for step in steps)
    assert all(step["duration_seconds"] is not None for step in steps)
    assert details["events"][0]["kind"] == "run_created"
    assert details["events"][-1]["kind"] == "run_completed"


def test_runs_show_table(world: World) -> None:
    result = wf(world.url, "runs", "show", "first-order")
    assert result.code == 0
    for text in ("generation 1", "reserve_stock", "timeline", "run_completed", "completed"):
        assert text in result.out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-such-run", "no run 'no-such-run'"),
        ("order=o-99", "no run has order='o-99'"),
        ("customer=c-1", "ambiguous"),
        ("=x", "KEY=VALUE"),
    ],
)
def test_unknown_and_ambiguous_runs_exit_1(world: World, spec: str, message: str) -> None:
    result = wf_here(world.url, "runs", "show", spec)
    assert result.code in (1, 2) and message in result.err
    assert result.code == (2 if spec == "=x" else 1)


def test_runs_events_json(world: World) -> None:
    result = wf(world.url, "runs", "events", "order=o-1", "--json")
    assert result.code == 0, result.err
    events = result.json()
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    created = events[0]
    assert created["kind"] == "run_created" and created["args"] == [["o-1", 2, 100], {}]
    completed = events[-1]
    assert completed["kind"] == "run_completed"
    assert set(completed["result"]) == {"reservation", "payment"}
    assert all("at" in event for event in events)


START = ("start", "examples.quickstart:checkout", '"o-9"', "1", "2", "--unique", "order=o-9")
"""``wf start`` of a checkout that claims ``order=o-9``."""


@pytest.fixture
def empty(tmp_path: Path) -> str:
    """A world of its own (``wf start`` creates it), for the tests that change what it holds."""
    return f"sqlite:///{tmp_path / 'start.db'}"


def test_start_json_prints_the_pending_run(empty: str) -> None:
    started = wf(empty, *START, "--attr", "customer=c-9", "--json")
    assert started.code == 0, started.err
    first = started.json()
    assert first["status"] == "pending" and first["attributes"] == {
        "customer": "c-9",
        "order": "o-9",
    }
    assert wf_here(empty, "runs", "show", "order=o-9", "--json").json()["run"]["id"] == first["id"]


def test_start_refuses_a_held_claim_naming_its_holder(empty: str) -> None:
    first = wf_here(empty, *START).out.strip()
    again = wf_here(empty, *START)
    assert again.code == 1 and first in again.err


def test_start_policy_get_prints_the_holder(empty: str) -> None:
    first = wf_here(empty, *START).out.strip()
    got = wf_here(empty, *START, "--policy", "get")
    assert got.code == 0 and got.out.strip() == first


def test_start_policy_fail_refuses(empty: str) -> None:
    wf_here(empty, *START)
    refused = wf_here(empty, *START, "--policy", "fail")
    assert refused.code == 1 and "already exists" in refused.err


def test_start_policy_cancel_replaces_the_holder(empty: str) -> None:
    first = wf_here(empty, *START).out.strip()
    newest = wf_here(empty, *START, "--policy", "cancel")
    assert newest.code == 0 and newest.out.strip() != first
    old = wf_here(empty, "runs", "show", first, "--json").json()
    assert old["run"]["status"] == "cancelled" and old["claims"] == {}
    current = wf_here(empty, "runs", "show", "order=o-9", "--json").json()
    assert current["run"]["id"] == newest.out.strip()
    assert current["claims"]["order"]["generation"] == 2


def test_runs_cancel_logs_the_reason_and_is_idempotent(empty: str) -> None:
    wf_here(empty, *START)
    cancelled = wf(empty, "runs", "cancel", "order=o-9", "--reason", "test")
    assert cancelled.code == 0 and "cancelled run" in cancelled.out
    log = wf_here(empty, "runs", "events", "order=o-9", "--json").json()
    assert log[-1] == {**log[-1], "kind": "run_cancelled", "reason": "test"}
    twice = wf_here(empty, "runs", "cancel", "order=o-9")
    assert twice.code == 0 and "already cancelled" in twice.out


@pytest.mark.parametrize(
    "args",
    [
        ["start", "examples.quickstart"],
        ["start", "examples.quickstart:checkout", "not-json"],
        ["start", "examples.quickstart:checkout", "--policy", "get"],
        ["start", "examples.quickstart:checkout", "--policy", "maybe", "--unique", "a=1"],
        ["runs", "list", "--status", "sleeping"],
        ["runs", "list", "--since", "yesterday-ish"],
        ["runs", "list", "--attr", "novalue"],
    ],
)
def test_usage_errors_exit_2(world: World, args: list[str]) -> None:
    result = wf_here(world.url, *args)
    assert result.code == 2, (result.out, result.err)
    assert "error" in result.err.lower()


def test_attributes_keys_counts_the_runs_of_each_key(world: World) -> None:
    keys = wf(world.url, "attributes", "keys", "--json")
    assert keys.code == 0, keys.err
    counts = {row["key"]: row["runs"] for row in keys.json()}
    assert counts["customer"] >= 5 and counts["$name"] == 1 and counts["tier"] == 2


def test_attributes_values_counts_the_runs_of_each_value(world: World) -> None:
    values = wf(world.url, "attributes", "values", "customer", "--json")
    found = {row["value"]: row["runs"] for row in values.json()}
    assert found["c-1"] == 2 and found["c-2"] == 1 and found["c-3"] == 2
    query = ("--query", "status = 'pending'", "--json")
    tiers = wf_here(world.url, "attributes", "values", "tier", *query)
    assert {row["value"] for row in tiers.json()} == {3, 4}


def test_world_info(world: World) -> None:
    info = wf(world.url, "world", "info", "--json")
    assert info.code == 0, info.err
    facts = info.json()
    assert facts["scheme"] == "sqlite" and facts["runs.completed"] >= 3


def test_world_migrate(world: World) -> None:
    migrate = wf(world.url, "world", "migrate")
    assert migrate.code == 0 and "schema is at version" in migrate.out


def test_an_unknown_world_scheme_exits_2(world: World) -> None:
    bad = wf_here("nope://x", "world", "info")
    assert bad.code == 2 and "unknown world scheme" in bad.err


def test_prune_before_a_day_prunes_nothing(world: World) -> None:
    nothing = wf_here(world.url, "runs", "prune", "--before", "1d", "--json")
    assert nothing.code == 0 and nothing.json()["pruned"] == 0


@pytest.fixture
def populated(tmp_path: Path) -> World:
    """A world of its own, populated like ``world``, for the tests that prune it."""
    url = f"sqlite:///{tmp_path / 'prune.db'}"
    done, pending = anyio.run(populate, url)
    return World(url, done, pending)


PRUNE = ("runs", "prune", "--before", "now", "--batch", "2", "--release-claims", "--json")


def test_prune_removes_the_closed_runs(populated: World) -> None:
    pruned = wf(populated.url, *PRUNE)
    assert pruned.code == 0, pruned.err
    assert sorted(pruned.json()["ids"]) == sorted(populated.done)
    left = wf_here(populated.url, "runs", "list", "--json").json()["runs"]
    assert [run["id"] for run in left] == populated.pending[::-1]
    gone = wf_here(populated.url, "runs", "show", "first-order")
    assert gone.code == 1


def test_a_claim_released_by_prune_is_taken_again_with_a_higher_generation(
    populated: World,
) -> None:
    assert wf_here(populated.url, *PRUNE).code == 0
    again = wf_here(
        populated.url,
        *("start", "examples.quickstart:checkout", '"o-0"', "1", "1", "--unique", "order=o-0"),
    )
    assert again.code == 0, again.err
    holder = wf_here(populated.url, "runs", "show", "order=o-0", "--json").json()
    assert holder["claims"]["order"]["generation"] == 2


@pytest.mark.parametrize(
    "command",
    [
        ["start"],
        ["worker"],
        ["runs", "list"],
        ["runs", "show"],
        ["runs", "events"],
        ["runs", "cancel"],
        ["runs", "prune"],
        ["attributes", "keys"],
        ["attributes", "values"],
        ["attributes", "holders"],
        ["attributes", "release"],
        ["world", "info"],
        ["world", "migrate"],
    ],
)
def test_every_command_has_an_example(command: list[str]) -> None:
    """In process: the subject is each command's help, not the entry point (the
    subprocess tests above start ``python -m cli`` for every command)."""
    done = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "Example" in done.stdout and "wf " in done.stdout
