"""``wf runs export|import`` and ``wf world copy``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import worlds
from tests.cli.test_cli import Result, wf, wf_here
from workflow import Unique, Worker, get_run, start, step, workflow
from worlds.archive import decode_archived


@step
async def cli_archive_double(n: int) -> int:
    return n * 2


@workflow
async def cli_archive_job(n: int) -> int:
    return await cli_archive_double(n)


def populate(url: str, count: int) -> list[str]:
    """``count`` completed runs of ``cli_archive_job``, each with a unique order, plus
    one pending run; their ids."""

    async def body() -> list[str]:
        async with worlds.open(url) as world:
            async with Worker(world, [cli_archive_job, cli_archive_double]):
                runs = [
                    await start(
                        cli_archive_job,
                        n,
                        attributes={"order": Unique(f"o-{n}"), "tier": "gold" if n % 2 else "x"},
                        world=world,
                    )
                    for n in range(count)
                ]
                for run in runs:
                    await run.result(timeout=60)
            pending = await start(cli_archive_job, 99, world=world)
            return [run.id for run in runs] + [pending.id]

    return anyio.run(body)


def wf_plain(*args: str) -> Result:
    """``python -m cli ARGS`` with no ``--world``."""
    return wf(None, *args)


def test_export_then_import_restores_the_runs(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    ids = populate(source, 4)
    out = tmp_path / "runs.jsonl"
    exported = wf(source, "runs", "export", "-o", str(out))
    assert exported.code == 0, exported.err
    assert f"exported 5 run(s) to {out}" in exported.out
    lines = out.read_bytes().splitlines()
    assert sorted(decode_archived(line).id for line in lines) == sorted(ids)
    imported = wf(target, "runs", "import", str(out))
    assert imported.code == 0, imported.err
    assert "imported 5 run(s)" in imported.out

    async def results() -> list[object]:
        async with worlds.open(target) as world:
            return [await get_run(i, world=world).result(timeout=5) for i in ids[:4]]

    assert anyio.run(results) == [0, 2, 4, 6]
    again = wf_here(target, "runs", "import", str(out))
    assert again.code == 1
    assert "already in this world" in again.err and "nothing was imported" in again.err


def test_export_to_standard_output_by_query_and_attribute(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path}/a.db"
    populate(source, 4)
    shown = wf_here(
        source, "runs", "export", "--query", "status = 'completed'", "--attr", "tier=gold"
    )
    assert shown.code == 0, shown.err
    documents = [json.loads(line) for line in shown.out.splitlines()]
    assert len(documents) == 2
    assert {d["attributes"]["order"] for d in documents} == {"o-1", "o-3"}
    assert all(d["status"] == "completed" and d["events"] for d in documents)
    bad = wf_here(source, "runs", "export", "--query", "status = ")
    assert bad.code == 2 and "malformed query" in bad.err


def test_world_copy_fills_an_empty_world_and_refuses_a_full_one(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    ids = populate(source, 3)
    copied = wf_plain("world", "copy", source, target, "--json")
    assert copied.code == 0, copied.err
    counts = json.loads(copied.out)
    assert counts["run"] == 4 and counts["claim"] == 3
    assert counts["work"] == 1  # the pending run's workflow task

    async def statuses() -> list[str]:
        async with worlds.open(target) as world:
            return [(await get_run(i, world=world).status()).value for i in ids]

    assert anyio.run(statuses) == ["completed"] * 3 + ["pending"]
    again = wf_plain("world", "copy", source, target)
    assert again.code == 1 and "is not empty" in again.err and "nothing was copied" in again.err
    human = wf_plain("world", "copy", source, f"sqlite:///{tmp_path}/c.db")
    assert human.code == 0 and "counts verified" in human.out


@pytest.mark.parametrize("missing", ["runs.jsonl"])
def test_import_of_a_missing_file_is_a_usage_error(tmp_path: Path, missing: str) -> None:
    result = wf_here(f"sqlite:///{tmp_path}/a.db", "runs", "import", str(tmp_path / missing))
    assert result.code == 2
