"""A throwaway PostgreSQL server for the tests and benchmarks.

``start(directory)`` creates a cluster with ``initdb`` under ``directory`` and
starts it with ``pg_ctl``: a unix socket in ``directory`` and 127.0.0.1 on a
free port, trust authentication, ``fsync=off`` (the data is thrown away;
``start(directory, durable=True)`` keeps fsync on, for fault injection).
``stop(directory)`` stops it. For fault injection, ``restart(directory, mode)``
restarts it (``fast`` or ``immediate``), ``freeze(directory)`` stops every
server process with SIGSTOP and ``thaw(directory)`` resumes them. PostgreSQL
refuses to run as root, so under root the server runs as the ``postgres``
user (created with ``useradd`` when missing, else ``nobody``), which then owns
``directory``.

For failover, ``start_pair(directory)`` starts a primary and a streaming
standby made from it with ``pg_basebackup`` (``directory/primary`` and
``directory/standby``, both on 127.0.0.1), with synchronous replication by
default (``synchronous_standby_names`` names the standby, so a commit is
acknowledged once the standby has it too); ``kill(directory)`` crashes a
server (``pg_ctl stop -m immediate``) and ``promote(directory)`` makes a
standby the primary (``pg_ctl promote``).

Usage::

    python -m tests.pg_server start DIR     # prints the server's URL
    python -m tests.pg_server stop DIR
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PgPair",
    "PgServer",
    "ServerError",
    "find_bin",
    "freeze",
    "kill",
    "promote",
    "restart",
    "server_pids",
    "start",
    "start_pair",
    "stop",
    "thaw",
]

_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "listen_addresses": "127.0.0.1",
}
_DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
_STANDBY_NAME = "standby"
"""The standby's ``application_name``, which ``synchronous_standby_names`` names."""
_REPLICATED = {"synchronous_commit": "on", "wal_level": "replica", "hot_standby": "on"}
"""A primary that a standby follows: commits wait for the standby when it is synchronous
(``synchronous_commit=off`` would acknowledge before the standby had anything)."""


class ServerError(RuntimeError):
    """No server could be started (binaries missing, initdb failed...)."""


@dataclass(frozen=True)
class PgServer:
    """A running server: its directory, port and connection URLs (user ``postgres``)."""

    directory: Path
    port: int

    @property
    def url(self) -> str:
        """A URL over TCP on 127.0.0.1, which every client library understands."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def socket_url(self) -> str:
        """A URL over the unix socket in ``directory``."""
        return f"postgresql://postgres@/postgres?host={self.directory}&port={self.port}"


def find_bin(name: str) -> str:
    """The path of PostgreSQL program ``name``: beside ``initdb`` on PATH, on PATH, else
    the newest packaged one (Debian puts wrappers on PATH for some programs, the
    programs themselves beside the server's)."""
    initdb = shutil.which("initdb")
    if initdb and name != "initdb":
        beside = Path(initdb).resolve().parent / name
        if beside.exists():
            return str(beside)
    found = shutil.which(name)
    if found:
        return found
    packaged = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    if packaged:
        return packaged[-1]
    raise ServerError(f"{name} not found on PATH or in /usr/lib/postgresql/*/bin")


def _server_user() -> pwd.struct_passwd | None:
    """The unprivileged account to run the server as, or None if we are not root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        pass
    if shutil.which("useradd"):
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "postgres"],
            check=False,
            capture_output=True,
        )
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            pass
    return pwd.getpwnam("nobody")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _run(command: list[str], user: pwd.struct_passwd | None) -> None:
    env = {**os.environ, "LC_ALL": "C"}
    if user is not None:
        env["HOME"] = "/tmp"
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        user=None if user is None else user.pw_uid,
        group=None if user is None else user.pw_gid,
    )
    if done.returncode != 0:
        raise ServerError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def start(
    directory: str | os.PathLike[str],
    *,
    durable: bool = False,
    settings: dict[str, str] | None = None,
) -> PgServer:
    """Create and start a cluster in ``directory`` (created if missing; must be empty).

    With ``durable`` the server keeps fsync, synchronous commit and full page
    writes on, as in production, so a crash loses nothing committed.
    ``settings`` override the server settings (``-c name=value``).

    Raises:
        ServerError: the binaries are missing or the server would not start.
    """
    root = _own_directory(directory)
    data = root / "data"
    user = _server_user()
    port = _free_port()
    _run(
        [
            find_bin("initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ],
        user,
    )
    return _launch(root, port, {**_SETTINGS, **(_DURABLE if durable else {}), **(settings or {})})


def _own_directory(directory: str | os.PathLike[str]) -> Path:
    """``directory`` resolved, created if missing, owned by the server's user."""
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    user = _server_user()
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
        root.chmod(0o700)
    return root


def _launch(root: Path, port: int, settings: dict[str, str]) -> PgServer:
    """Start the cluster in ``root/data`` on ``port`` with ``settings``; remember both."""
    options = " ".join(f"-c {name}={value}" for name, value in settings.items())
    options += f" -c port={port} -c unix_socket_directories={root}"
    (root / "port").write_text(str(port))
    (root / "options").write_text(options)
    start_again(root)
    return PgServer(root, port)


@dataclass(frozen=True)
class PgPair:
    """A primary and its streaming standby, and the URL that lists both."""

    primary: PgServer
    standby: PgServer
    synchronous: bool

    @property
    def url(self) -> str:
        """A multi-host URL, the primary first: clients connect to whichever accepts writes."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/postgres"


def start_pair(
    directory: str | os.PathLike[str], *, synchronous: bool = True, durable: bool = False
) -> PgPair:
    """Start a primary in ``directory/primary`` and a standby of it in ``directory/standby``.

    The standby is a ``pg_basebackup`` of the primary that streams its WAL
    (hot standby: it answers reads). ``synchronous``: the primary's
    ``synchronous_standby_names`` names the standby, so a commit is
    acknowledged only once the standby has flushed it; otherwise replication is
    asynchronous and a commit acknowledged just before the primary dies may be
    missing on the standby. Returns once the standby streams (and, when
    synchronous, is the synchronous one).

    Raises:
        ServerError: the binaries are missing or a server would not start.
    """
    root = _own_directory(directory)
    replicated = {
        **_REPLICATED,
        **({"synchronous_standby_names": _STANDBY_NAME} if synchronous else {}),
    }
    primary = start(root / "primary", durable=durable, settings=replicated)
    standby_root = _own_directory(root / "standby")
    _run(
        [find_bin("pg_basebackup"), "-D", str(standby_root / "data"), "-h", "127.0.0.1",
         "-p", str(primary.port), "-U", "postgres", "-X", "stream", "-R", "--no-sync"],
        _server_user(),
    )  # fmt: skip
    conninfo = f"host=127.0.0.1 port={primary.port} user=postgres application_name={_STANDBY_NAME}"
    with (standby_root / "data" / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"primary_conninfo = '{conninfo}'\n")  # the last setting wins
    # The standby waits for no standby of its own: once promoted it runs alone (as a
    # failover manager leaves it when no replica is left), else its commits would hang.
    settings = {**_SETTINGS, **(_DURABLE if durable else {}), **_REPLICATED}
    standby = _launch(standby_root, _free_port(), settings)
    wanted = "sync" if synchronous else "async"
    _wait_for(
        primary,
        f"SELECT count(*) FROM pg_stat_replication WHERE application_name = '{_STANDBY_NAME}'"
        f" AND state = 'streaming' AND sync_state = '{wanted}'",
    )
    return PgPair(primary, standby, synchronous)


def _wait_for(server: PgServer, query: str, within: float = 60.0) -> None:
    """Wait until ``query`` (one count) answers 1 on ``server``."""
    deadline = time.monotonic() + within
    answer = ""
    while time.monotonic() < deadline:
        done = subprocess.run(
            [find_bin("psql"), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
             "-d", "postgres", "-Atc", query],
            capture_output=True, text=True, check=False, env={**os.environ, "LC_ALL": "C"},
        )  # fmt: skip
        answer = (done.stdout + done.stderr).strip()
        if answer == "1":
            return
        time.sleep(0.1)
    raise ServerError(f"{query!r} did not answer 1 within {within} s (last: {answer!r})")


def kill(directory: str | os.PathLike[str]) -> None:
    """Crash the server in ``directory``: ``pg_ctl stop -m immediate`` (no checkpoint)."""
    data = Path(directory).resolve() / "data"
    _run([find_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], _server_user())


def promote(directory: str | os.PathLike[str]) -> None:
    """Make the standby in ``directory`` the primary (``pg_ctl promote``, waiting for it)."""
    data = Path(directory).resolve() / "data"
    _run([find_bin("pg_ctl"), "-D", str(data), "-w", "-t", "60", "promote"], _server_user())


def stop(directory: str | os.PathLike[str]) -> None:
    """Stop the server started in ``directory`` (fast shutdown); quiet if it is not running.

    A pair's directory (``start_pair``) stops both servers, the standby first.
    """
    root = Path(directory).resolve()
    if not (root / "data").exists() and (root / "primary").exists():
        for member in ("standby", "primary"):
            stop(root / member)
        return
    data = root / "data"
    if not (data / "postmaster.pid").exists():
        return
    _run([find_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], _server_user())


def restart(directory: str | os.PathLike[str], mode: str = "fast") -> None:
    """Restart the server in ``directory``: ``fast`` (clients are disconnected and
    the server shuts down cleanly) or ``immediate`` (a crash: recovery on start)."""
    if mode not in ("fast", "immediate"):
        raise ValueError(f"restart mode must be 'fast' or 'immediate', not {mode!r}")
    data = Path(directory).resolve() / "data"
    _run([find_bin("pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"], _server_user())
    start_again(directory)


def start_again(directory: str | os.PathLike[str]) -> None:
    """Start the stopped server in ``directory`` again, on its port and settings."""
    root = Path(directory).resolve()
    options = (root / "options").read_text()
    log = str(root / "server.log")
    command = [find_bin("pg_ctl"), "-D", str(root / "data"), "-l", log, "-o", options]
    _run([*command, "-w", "-t", "60", "start"], _server_user())


def server_pids(directory: str | os.PathLike[str]) -> list[int]:
    """The process ids of the server in ``directory``: the postmaster, then its children."""
    pid_file = Path(directory).resolve() / "data" / "postmaster.pid"
    postmaster = int(pid_file.read_text().split()[0])
    children = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            children.append(int(Path(stat).parent.name))
    return [postmaster, *sorted(children)]


def freeze(directory: str | os.PathLike[str]) -> list[int]:
    """Stop every process of the server in ``directory`` (SIGSTOP); return their ids."""
    pids = []
    for pid in server_pids(directory):
        # A backend that exits between the listing and its signal needs no stopping.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
            pids.append(pid)
    return pids


def thaw(directory: str | os.PathLike[str]) -> None:
    """Resume every process of the server in ``directory`` (SIGCONT)."""
    for pid in server_pids(directory):
        # The postmaster, resumed first, may reap a listed backend (one whose client went
        # away) before it is signalled: a process that is gone needs no resuming.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def main(argv: list[str]) -> int:
    """``start DIR`` prints the URL; ``stop DIR`` stops the server."""
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.pg_server start|stop DIR", file=sys.stderr)
        return 2
    try:
        if argv[0] == "start":
            print(start(argv[1]).url)
        else:
            stop(argv[1])
    except ServerError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
