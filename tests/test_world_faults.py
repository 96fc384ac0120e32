"""Worlds under faults: a frozen server, a full disk, an unwritable place.

Driver errors reach callers as the ``worlds.errors`` tree, whose class alone
says whether waiting can help. The PostgreSQL tests freeze a server of their
own (SIGSTOP on every server process), so the session's server stays usable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests import pg_server
from worlds.errors import WorldUnavailableError
from worlds.postgres import PostgresWorld
from worlds.testing._base import WF, create_run, lease_all

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[str]:
    """A directory with a running PostgreSQL server that only this module uses."""
    directory = tempfile.mkdtemp(prefix="wf-pg-faults-")
    try:
        pg_server.start(directory)
    except (pg_server.ServerError, OSError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and no PostgreSQL server could be started: {exc}")
        pytest.skip(f"no PostgreSQL server could be started: {exc}")
    try:
        yield directory
    finally:
        pg_server.thaw(directory)
        pg_server.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


def _tcp_url(directory: str, **options: str) -> str:
    port = int((Path(directory) / "port").read_text())
    query = "&".join(f"{name}={value}" for name, value in options.items())
    return f"postgresql://postgres@127.0.0.1:{port}/postgres?{query}"


@pytest.mark.slow
async def test_a_frozen_postgres_server_is_noticed_and_left_behind(own_postgres: str) -> None:
    """Every operation on a frozen server fails as unavailable within seconds; once
    the server runs again the same world object works without being reopened."""
    url = _tcp_url(own_postgres, command_timeout="2", schema="frozen")
    async with PostgresWorld(url) as world:
        run = await create_run(world)
        pg_server.freeze(own_postgres)
        try:
            for operation in (
                lambda: world.get_run(run.id),
                lambda: lease_all(world, {WF}),
                lambda: create_run(world),
            ):
                with anyio.fail_after(20):  # detects a hang; the command timeout is 2 s
                    with pytest.raises(WorldUnavailableError, match="did not answer in time"):
                        await operation()
        finally:
            pg_server.thaw(own_postgres)
        with anyio.fail_after(30):
            while True:
                try:
                    found = await world.get_run(run.id)
                    break
                except WorldUnavailableError:
                    await anyio.sleep(0.2)
        assert found is not None and found.id == run.id
        assert [item.run_id for item in await lease_all(world, {WF})] == [run.id]
