"""What ``wf`` prints: stored values as they are, escaped; a run's result; a long log cut.

Values that look like Rich markup print literally, and control characters
(ESC, bidi overrides) print as escapes, in every command that shows user data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from tests.cli.test_cli import wf_here
from workflow import Unique, Worker, set_attribute, start, workflow

ROOT = Path(__file__).resolve().parents[2]

MARKUP = "[bold red]HI[/]"
ESCAPE = "a\x1b[2Jb\x1b]0;owned\x07"
BIDI = "x\u202ey"


@workflow
async def cli_output_flow(size: int, events: int) -> str:
    for n in range(events):
        await set_attribute("n", n)
    return "r" * size


def wf(url: str, *args: str) -> tuple[int, str]:
    """``wf ARGS --world URL`` in process, 400 columns wide: the exit code, stdout+stderr."""
    done = wf_here(url, *args, columns=400)
    return done.code, done.out + done.err


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('out') / 'w.db'}"

    async def populate() -> None:
        async with worlds.open(url) as world:
            attributes: dict[str, Any] = {
                "m": MARKUP,
                "esc": ESCAPE,
                "bidi": BIDI,
                "order": Unique("o-1"),
                "[k]": "v",
            }
            await start(cli_output_flow, 0, 0, attributes=attributes, world=world)

    anyio.run(populate)
    return url


def assert_safe(output: str) -> None:
    assert "\x1b" not in output and "\x07" not in output and "\u202e" not in output


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list"],
        ["runs", "show", "order=o-1"],
        ["runs", "events", "order=o-1"],
        ["attributes", "values", "m"],
        ["attributes", "values", "esc"],
        ["attributes", "keys"],
    ],
)
def test_stored_values_print_literally_and_escaped(url: str, args: list[str]) -> None:
    code, output = wf(url, *args)
    assert code == 0, output
    assert_safe(output)
    if args[1] == "values":
        assert (MARKUP if args[2] == "m" else "a\\x1b[2Jb\\x1b]0;owned\\x07") in output
    elif args[1] == "keys":
        assert "[k]" in output
    else:
        assert MARKUP in output or json.dumps(MARKUP) in output
        assert "\\x1b[2J" in output or "\\u001b[2J" in output
        if args[1] != "events":  # whose lines are cut at 60 characters
            assert "x\\u202ey" in output


@pytest.mark.parametrize(
    "args",
    [["runs", "list", "--json"], ["runs", "show", "order=o-1", "--json"]],
)
def test_json_escapes_what_would_drive_a_terminal(url: str, args: list[str]) -> None:
    code, output = wf(url, *args)
    assert code == 0, output
    assert_safe(output)
    document = json.loads(output)
    run = document["runs"][0] if "runs" in document else document["run"]
    assert run["attributes"]["esc"] == ESCAPE and run["attributes"]["bidi"] == BIDI
    assert run["attributes"]["m"] == MARKUP


def test_an_error_naming_a_value_is_escaped(url: str) -> None:
    code, output = wf(url, "runs", "show", f"m={ESCAPE}{MARKUP}")
    assert code == 1
    assert_safe(output)
    assert MARKUP in output


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('closed') / 'w.db'}"

    async def populate() -> None:
        async with worlds.open(url) as world, Worker(world, [cli_output_flow]):
            small = await start(cli_output_flow, 5, 0, attributes={"$name": "small"}, world=world)
            big = await start(
                cli_output_flow, 100_000, 200, attributes={"$name": "big"}, world=world
            )
            await small.result(timeout=60)
            await big.result(timeout=60)

    anyio.run(populate)
    return url


def test_runs_show_prints_the_result_of_a_closed_run(closed: str) -> None:
    code, output = wf(closed, "runs", "show", "small")
    assert code == 0, output
    assert 'result "rrrrr"' in output
    code, output = wf(closed, "runs", "show", "big")
    assert code == 0, output
    assert "more characters; --json prints it all" in output
    assert len(output) < 50_000


def test_runs_show_cuts_a_long_log_to_its_ends(closed: str) -> None:
    code, output = wf(closed, "runs", "show", "big")
    assert code == 0, output
    timeline = output[output.index("timeline") :]
    assert "(40 of 203 events)" in timeline
    assert "events not shown" in timeline and "--events all" in timeline
    code, everything = wf(closed, "runs", "show", "big", "--events", "all")
    assert "(203 of 203 events)" in everything
    code, ranged = wf(closed, "runs", "show", "big", "--events", "100-109", "--json")
    document = json.loads(ranged)
    assert [event["seq"] for event in document["events"]] == list(range(100, 110))
    assert document["events_total"] == 203
    code, default = wf(closed, "runs", "show", "big", "--json")
    document = json.loads(default)
    assert len(document["events"]) == 40
    assert document["events_omitted"] == {"from": 21, "to": 183}
    assert document["run"]["result"] == "r" * 100_000


@pytest.mark.parametrize("spec", ["some", "1-x", "-", "10"])
def test_a_bad_events_range_is_a_usage_error(closed: str, spec: str) -> None:
    code, output = wf(closed, "runs", "show", "big", "--events", spec)
    assert code == 2, output


def test_runs_events_prints_a_range(closed: str) -> None:
    code, output = wf(closed, "runs", "events", "big", "--range", "10-14", "--json")
    assert code == 0, output
    assert [event["seq"] for event in json.loads(output)] == [10, 11, 12, 13, 14]
    code, output = wf(closed, "runs", "events", "big", "--json")
    assert len(json.loads(output)) == 203
    code, output = wf(closed, "runs", "events", "big", "--range", "x")
    assert code == 2 and "--range" in output
