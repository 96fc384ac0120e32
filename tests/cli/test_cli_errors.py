"""Every ``wf`` command against bad worlds and bad input: one line, an exit code, no traceback.

The sweep runs the real command (typer's ``CliRunner``, in process, so it is
quick) for each command and each bad world, and asserts the exit code, that
the error is one line naming the problem, and that no traceback escaped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import worlds
from cli.main import app
from tests.conftest import drop_schema, fresh_schema
from worlds.errors import WorldMisconfiguredError

ROOT = Path(__file__).resolve().parents[2]

COMMANDS: dict[str, list[str]] = {
    "start": ["start", "examples.quickstart:checkout", '"o-1"', "1", "2"],
    "runs list": ["runs", "list"],
    "runs show": ["runs", "show", "order=o-1"],
    "runs events": ["runs", "events", "order=o-1"],
    "runs cancel": ["runs", "cancel", "order=o-1"],
    "runs prune": ["runs", "prune", "--before", "1d"],
    "attributes keys": ["attributes", "keys"],
    "attributes values": ["attributes", "values", "customer"],
    "hooks list": ["hooks", "list"],
    "hooks resume": ["hooks", "resume", "some-token", "1"],
    "world info": ["world", "info"],
    "world migrate": ["world", "migrate"],
}
CREATING = {"start", "world migrate"}
"""Commands that create a missing world; every other one refuses to."""


def wf(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    """Run ``wf ARGS`` in process; the exit code and stderr+stdout."""
    runner = CliRunner()
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = runner.invoke(app, list(args), env={"COLUMNS": "300", "WORKFLOW_WORLD": None})
    finally:
        os.chdir(before)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"wf {' '.join(args)} raised {result.exception!r}\n{output}")
    assert "Traceback" not in output, output
    return result.exit_code, output


def error_line(output: str) -> str:
    """The one ``error:`` line of ``output`` (asserting there is exactly one)."""
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


@pytest.fixture
def bad_files(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "notes.txt").write_text("not a database\n" * 100)
    (tmp_path / "a-directory").mkdir()
    yield tmp_path


BAD_SQLITE = {
    # name: (url template, exit code for every command, text the error names)
    "not a database": ("sqlite:///{tmp}/notes.txt", 1, "not a database"),
    "a directory": ("sqlite:///{tmp}/a-directory", 1, "a-directory"),
    "memory world": ("memory://", 1, "thrown away"),
    "sqlite memory": ("sqlite:///:memory:", 1, "thrown away"),
    "unknown scheme": ("nope://x", 2, "unknown world scheme"),
    "no path": ("sqlite://", 2, "no path"),
    "unknown option": ("sqlite:///{tmp}/w.db?bogus=1", 2, "unknown option 'bogus'"),
    "bad option value": ("sqlite:///{tmp}/w.db?poll=soon", 2, "must be a number"),
    "postgres unreachable": ("postgresql://u:s3cretpw@127.0.0.1:1/db", 1, "postgresql://u:***@"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("bad", sorted(BAD_SQLITE))
def test_every_command_on_a_bad_world(bad_files: Path, command: str, bad: str) -> None:
    template, code, names = BAD_SQLITE[bad]
    url = template.format(tmp=bad_files)
    got, output = wf(*COMMANDS[command], "--world", url)
    assert got == code, output
    line = error_line(output)
    assert names in line
    assert "s3cretpw" not in output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_world_is_created_only_by_commands_that_write(
    tmp_path: Path, command: str
) -> None:
    got, output = wf(*COMMANDS[command], "--world", "sqlite:///data/x.db", cwd=tmp_path)
    created = (tmp_path / "data" / "x.db").exists()
    if command in CREATING:
        assert got == 0, output
        assert created
    else:
        assert got == 1, output
        assert f"no SQLite world at {tmp_path / 'data' / 'x.db'}" in error_line(output)
        assert not created and not (tmp_path / "data").exists()


@pytest.fixture
def bad_postgres(postgres_url: str) -> Iterator[dict[str, tuple[str, str]]]:
    """Bad URLs on the test server: (url, text the error names)."""
    base, _, query = postgres_url.partition("?")
    scheme, _, rest = base.partition("://")
    user, _, host_db = rest.partition("@")
    host = host_db.partition("/")[0]
    schema = fresh_schema()
    bad = {
        "no such database": (f"{scheme}://{user}@{host}/typo_db?{query}", "typo_db"),
        "no such user": (f"{scheme}://nosuchuser:pw@{host}/postgres?{query}", "nosuchuser"),
        "bad option": (f"{postgres_url}&foo=bar", "foo"),
        "no such schema": (f"{postgres_url}&schema={schema}", schema),
    }
    yield bad
    drop_schema(bad["no such schema"][0])  # the writing commands created it


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "bad", ["no such database", "no such user", "bad option", "no such schema"]
)
def test_every_command_on_a_bad_postgres_world(
    bad_postgres: dict[str, tuple[str, str]], command: str, bad: str
) -> None:
    url, names = bad_postgres[bad]
    got, output = wf(*COMMANDS[command], "--world", url)
    if bad == "no such schema" and command in CREATING:
        assert got == 0, output  # writing commands create the schema
        return
    assert got == 1, output
    assert names in error_line(output)


def test_world_info_masks_the_password(postgres_world_url: str) -> None:
    base, _, query = postgres_world_url.partition("?")
    secret = base.replace("postgres@", "postgres:s3cretpw@", 1) + "?" + query
    assert wf("world", "migrate", "--world", secret)[0] == 0
    got, output = wf("world", "info", "--json", "--world", secret)
    assert got == 0, output
    facts = json.loads(output)
    assert facts["url"].startswith("postgresql://postgres:***@")
    assert "s3cretpw" not in output


@pytest.fixture
def read_only_db(tmp_path: Path) -> Iterator[Path]:
    """A migrated world file that cannot be written, even by root (``chattr +i``)."""
    db = tmp_path / "ro.db"
    assert wf("world", "migrate", "--world", f"sqlite:///{db}")[0] == 0
    os.chmod(db, 0o444)
    immutable = shutil.which("chattr") is not None and (
        subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode == 0
    )
    if os.geteuid() == 0 and not immutable:
        pytest.skip("running as root without chattr: no file is read-only")
    try:
        yield db
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(db)], check=True)


def test_start_on_a_read_only_database(read_only_db: Path) -> None:
    got, output = wf(*COMMANDS["start"], "--world", f"sqlite:///{read_only_db}")
    assert got == 1, output
    line = error_line(output)
    assert str(read_only_db) in line and "readonly" in line.replace("read-only", "readonly")
    listed, output = wf("runs", "list", "--world", f"sqlite:///{read_only_db}")
    assert listed == 0, output


def test_a_deeply_nested_hook_payload_is_a_usage_error(tmp_path: Path) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    got, output = wf("hooks", "resume", "a-token", deep, "--world", f"sqlite:///{tmp_path}/w.db")
    assert got == 2, output
    assert "nested" in error_line(output)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["runs", "cancel", "order=o-1", "--now", "--grace", "5"], "--grace"),
        (["hooks", "resume", "bad token!", "1"], "hook token"),
        (["hooks", "resume", "", "1"], "hook token"),
        (["runs", "show", "x", "--events", "soon"], "--events"),
        (["start", "examples.quickstart:checkout", "--reuse", "allow-duplicate"], "--reuse"),
    ],
)
def test_usage_errors_exit_2_before_the_world_is_touched(
    tmp_path: Path, args: list[str], names: str
) -> None:
    world = tmp_path / "w.db"
    assert wf("world", "migrate", "--world", f"sqlite:///{world}")[0] == 0
    got, output = wf(*args, "--world", f"sqlite:///{world}")
    assert got == 2, output
    assert names in error_line(output)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_shows_flags_as_plain_flags(command: str) -> None:
    got, output = wf(*COMMANDS[command][: 2 if " " in command else 1], "--help")
    assert got == 0, output
    assert "<bool>" not in output
    assert "--help" in output


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cretpw@db:5432/app", "postgresql://u:***@db:5432/app"),
        ("postgres://u:s3cret@pw@db/app?x=1", "postgres://u:***@db/app?x=1"),
        ("postgresql://u@db/app?password=s3cretpw&x=1", "postgresql://u@db/app?password=***&x=1"),
        ("postgresql://u@db/app", "postgresql://u@db/app"),
        ("sqlite:///app.db?poll=1", "sqlite:///app.db?poll=1"),
    ],
)
def test_redact_url_masks_credentials(url: str, shown: str) -> None:
    assert worlds.redact_url(url) == shown
    assert (
        worlds.redact_url(f"could not reach {url}: refused") == f"could not reach {shown}: refused"
    )


def test_reprs_and_url_errors_mask_the_password() -> None:
    assert "s3cretpw" not in repr(worlds.open("postgresql://u:s3cretpw@db/app"))
    with pytest.raises(ValueError) as caught:
        worlds.open("postgresql://u:s3cretpw@db/app?poll=soon")
    assert "s3cretpw" not in str(caught.value) and "u:***@db" in str(caught.value)
    got, output = wf("runs", "list", "--world", "postgresql://u:s3cretpw@db/app?poll=soon")
    assert got == 2 and "s3cretpw" not in output and "u:***@" in output


@pytest.mark.anyio
async def test_a_world_that_must_exist_is_never_created(
    world_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if world_kind == "memory":
        with pytest.raises(WorldMisconfiguredError, match="thrown away"):
            worlds.open("memory://", create=False)
        with pytest.raises(WorldMisconfiguredError, match="thrown away"):
            worlds.open("memory://", shared=True)
        return
    if world_kind == "sqlite":
        url = f"sqlite:///{tmp_path}/sub/w.db"
        names = str(tmp_path / "sub" / "w.db")
    else:
        url = str(request.getfixturevalue("postgres_world_url"))
        names = url.rpartition("schema=")[2]
    async with worlds.open(url, create=False) as world:
        with pytest.raises(WorldMisconfiguredError) as caught:
            await world.info()
    assert names in str(caught.value)
    assert not (tmp_path / "sub").exists()
    async with worlds.open(url) as world:  # created
        await world.migrate()
    async with worlds.open(url, create=False) as world:  # now it exists
        assert int((await world.info())["schema_version"]) >= 1


def test_a_factory_that_cannot_promise_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import worlds as package

    def factory(url: str) -> Any:
        raise AssertionError("never called")

    monkeypatch.setattr(package, "_factories", lambda: {"plain": factory})
    with pytest.raises(ValueError, match="cannot promise"):
        worlds.open("plain://x", create=False)


@pytest.mark.parametrize(
    ("url", "code", "names"),
    [
        ("nope://x", 2, "unknown world scheme"),
        ("sqlite://", 2, "no path"),
        ("memory://", 1, "thrown away"),
        ("postgresql://u:s3cretpw@db/app?poll=soon", 2, "u:***@db"),
    ],
)
def test_worker_refuses_a_bad_world_url(url: str, code: int, names: str) -> None:
    got, output = wf("worker", "examples.quickstart", "--world", url)
    assert got == code, output
    assert names in error_line(output) and "s3cretpw" not in output
