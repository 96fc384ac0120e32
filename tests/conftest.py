"""Shared fixtures: every runtime test runs against each built-in world.

The PostgreSQL world runs against ``$WORKFLOW_TEST_POSTGRES`` (a URL) when it is
set, else against a throwaway server that ``tests/pg_server.py`` starts for the
session. Without one, its tests are skipped, except when ``$CI`` is set: then
they fail, so CI never passes by skipping them. Each test gets a fresh schema.

The suite runs on pytest-xdist workers (``pyproject.toml``): a session fixture
is one per worker process, so each worker has its own server (its own directory
and port) and its own browser (``tests/browser.py``). The heaviest
multi-process tests run at a smaller size unless ``WORKFLOW_TEST_FULL=1``
(``full_size``; rfcs/0020-test-suite.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import worlds
from tests import pg_server
from tests.pg_schemas import SchemaPool
from worlds.protocol import World


def cache_bytecode_outside_the_tree() -> None:
    """Let this process and the ones it starts cache bytecode, outside the source tree.

    The suite starts hundreds of Python processes (its xdist workers, the worker and CLI
    subprocesses of the tests), each importing the package. With
    ``PYTHONDONTWRITEBYTECODE`` set, each compiled it from source again, and each xdist
    worker had pytest rewrite every test module again (about 10 s of CPU per worker). So
    when bytecode is off, it goes instead to a directory of this user's under the temp
    directory (``PYTHONPYCACHEPREFIX``), and still never into the tree. Without the
    variable Python's own ``__pycache__`` is left as it is.
    """
    if not (sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return
    prefix = Path(tempfile.gettempdir()) / f"attribute-workflows-pycache-{os.getuid()}"
    with contextlib.suppress(OSError):
        prefix.mkdir(mode=0o700, exist_ok=True)
    try:
        if prefix.stat().st_uid != os.getuid():  # someone else's: not trusted
            return
    except OSError:
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(prefix))
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = False


cache_bytecode_outside_the_tree()

# pytest-xdist sets COLUMNS=80 in its workers; the CLI's console, made when cli is imported,
# would keep that width, where each CLI test gives its invocation a COLUMNS of its own.
os.environ.pop("COLUMNS", None)

FULL = os.environ.get("WORKFLOW_TEST_FULL") == "1"
"""Run the heaviest multi-process tests at full size (CI's second pass)."""


def full_size(default: int, full: int) -> int:
    """``full`` with ``WORKFLOW_TEST_FULL=1``, else the smaller ``default``."""
    return full if FULL else default


# No property of the suite is about time, and Hypothesis's default deadline (200 ms an
# example) fails examples that a loaded machine merely ran slowly: the suite's profile has
# none. A test's own @settings still sets what it names.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


WORLD_KINDS = ["memory", "sqlite"] if importlib.util.find_spec("worlds.sqlite") else ["memory"]
if importlib.util.find_spec("worlds.postgres"):
    WORLD_KINDS.append("postgres")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def world_url(kind: str, tmp_path: Path, postgres: str | None = None) -> str:
    """A URL for a fresh, empty world of ``kind`` (``postgres``: the server's URL)."""
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return unsynced(f"sqlite:///{tmp_path}/world.db")
    if kind == "postgres":
        if postgres is None:
            raise ValueError("a postgres world needs the server's URL")
        return patient(with_schema(postgres, fresh_schema()))
    raise ValueError(kind)


def unsynced(url: str) -> str:
    """``url`` (an SQLite world's, without a query) with ``synchronous=normal``.

    The suite's PostgreSQL servers run with ``fsync=off``; an SQLite world's default,
    ``synchronous=full``, makes every commit wait for the disk (about 1 ms on this
    machine's disk when it is quiet, far more when other processes write). Thousands of
    the suite's commits waited so. In WAL mode ``normal`` loses nothing when a process
    dies, which is all a test can do to a world; only a power loss can roll the last
    commits back. ``tests/worlds/test_sqlite_world.py`` keeps the default's own tests, and
    the SQLite conformance class runs on the default.
    """
    return f"{url}?synchronous=normal"


def patient(url: str) -> str:
    """``url`` (a PostgreSQL world's, with a query) with statements allowed 30 s.

    The suite runs eight workers, and some tests several OS processes against one
    world, on two shared cores: a statement can wait on the CPU and on other
    processes' locks well past the world's default ``command_timeout`` (4 s), a
    hang detector the fault tests check on servers of their own.
    """
    return f"{url}&command_timeout=30"


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:16]}"


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``schema=`` added to its query."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def drop_schema(url: str) -> None:
    """Drop the schema a test's world ``url`` names (best effort; the server may be gone)."""
    import asyncpg

    from worlds.postgres import PostgresWorld

    world = PostgresWorld(url)

    async def drop() -> None:
        conn = await asyncpg.connect(world.dsn)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{world.schema}" CASCADE')
        finally:
            await conn.close()

    with contextlib.suppress(OSError, asyncpg.exceptions.PostgresError):
        asyncio.run(drop())


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server URL for the session (see the module docstring)."""
    configured = os.environ.get("WORKFLOW_TEST_POSTGRES")
    if configured:
        yield configured
        return
    # Under /tmp rather than pytest's tmp_path: when the tests run as root the
    # server runs as another user, who must be able to reach the directory.
    # One server per xdist worker: each picks a free port, and two workers may pick the
    # same one at once, so a start that fails is tried again in a fresh directory.
    for attempt in range(3):
        directory = tempfile.mkdtemp(prefix="wf-pg-")
        try:
            server = pg_server.start(directory)
            break
        except (pg_server.ServerError, OSError) as exc:
            with contextlib.suppress(pg_server.ServerError, OSError):
                pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)
            if attempt < 2:
                continue
            if os.environ.get("CI"):
                pytest.fail(f"CI is set and no PostgreSQL server could be started: {exc}")
            pytest.skip(f"no PostgreSQL server could be started: {exc}")
    try:
        with settled(server.socket_url):
            yield server.socket_url
    finally:
        pg_server.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def settled(url: str) -> Iterator[None]:
    """Hold one client connection to the server at ``url`` open while the block runs.

    The PostgreSQL world takes an expired lease over only once the server has accepted
    connections for one lease length (at most 5 s; the oldest client connection marks
    it), so that a restart's downtime does not count against the holders. Without this
    connection each test's own pool would be the oldest, and every lease-expiry test
    would wait out those 5 s as after a restart; a server up for the session is what
    a worker meets in production. The restart rule is tested on servers of their own
    (``tests/worlds/test_world_faults.py``).
    """
    psql = subprocess.Popen(
        [pg_server.find_bin("psql"), "-X", "-q", "-A", "-t", "-d", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert psql.stdin is not None and psql.stdout is not None
    try:
        psql.stdin.write("SELECT 1;\n")
        psql.stdin.flush()
        psql.stdout.readline()  # "1": connected (empty if psql could not connect)
        yield
    finally:
        with contextlib.suppress(OSError):
            psql.stdin.close()
        try:
            psql.wait(timeout=10)
        except subprocess.TimeoutExpired:
            psql.kill()
            psql.wait()


@pytest.fixture
def postgres_world_url(postgres_url: str) -> Iterator[str]:
    """A URL for a PostgreSQL world in a fresh schema, dropped after the test."""
    url = patient(with_schema(postgres_url, fresh_schema()))
    yield url
    drop_schema(url)


@pytest.fixture(scope="session")
def schema_pool(postgres_url: str) -> Iterator[SchemaPool]:
    """This worker's pool of migrated, empty world schemas (``tests/pg_schemas.py``)."""
    pool = SchemaPool(postgres_url)
    yield pool
    pool.close()


@pytest.fixture
def migrated_world_url(schema_pool: SchemaPool, postgres_url: str) -> Iterator[str]:
    """A URL for a PostgreSQL world in a fresh schema, migrated and empty already.

    For the tests of what a world does (the conformance kit, every test parametrized over
    the worlds), not of its migrations: ``postgres_world_url`` gives a schema the world
    creates itself. The schema is emptied and pooled after the test, or dropped when the
    test changed it.
    """
    name = fresh_schema()
    url = patient(with_schema(postgres_url, name))
    schema_pool.take(name, url)
    yield url
    if not schema_pool.give_back(name):
        drop_schema(url)


@pytest.fixture
def app_database(postgres_url: str) -> Iterator[str]:
    """A URL for a fresh PostgreSQL database on the session's server (an application
    database, not a world's), dropped after the test."""
    import asyncpg

    name = fresh_schema()
    base, sep, query = postgres_url.partition("?")
    url = f"{base.rsplit('/', 1)[0]}/{name}{sep}{query}"

    async def run(statement: str) -> None:
        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    yield url
    with contextlib.suppress(OSError, asyncpg.exceptions.PostgresError):
        asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=WORLD_KINDS)
def world_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_world(
    world_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[], World]:
    """Open a world over this test's storage (memory worlds are one shared object)."""
    if world_kind == "postgres":
        url = str(request.getfixturevalue("migrated_world_url"))
    else:
        url = world_url(world_kind, tmp_path)
    shared = worlds.open(url) if world_kind == "memory" else None
    return lambda: shared if shared is not None else worlds.open(url)


@pytest.fixture
async def world(make_world: Callable[[], World]) -> AsyncIterator[World]:
    opened = make_world()
    async with opened:
        yield opened


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make ``xdist_group`` group again in the xdist workers.

    pytest-xdist (3.8) names a grouped test ``nodeid@group`` by setting ``item._nodeid``, but
    pytest 9.2 reads a node's id from ``item._id``: the name stayed as it was, so
    ``--dist loadgroup`` sent each grouped test out alone, and a module fixture that
    a group shares (a docs build, a wheel, a server of its own) was built once per worker
    and again at each switch between modules. This sets the name where pytest reads it; a
    pytest-xdist that does so already leaves nothing to do here.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        node_id = getattr(item, "_id", None)
        if not names or node_id is None or "@" in item.nodeid:
            continue
        item._id = type(node_id).parse(f"{item.nodeid}@{'_'.join(sorted(names))}")
