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

Usage::

    python -m tests.pg_server start DIR     # prints the server's URL
    python -m tests.pg_server stop DIR
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PgServer",
    "ServerError",
    "find_bin",
    "freeze",
    "restart",
    "server_pids",
    "start",
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
    """The path of PostgreSQL program ``name``: on PATH, else the newest packaged one."""
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


def start(directory: str | os.PathLike[str], *, durable: bool = False) -> PgServer:
    """Create and start a cluster in ``directory`` (created if missing; must be empty).

    With ``durable`` the server keeps fsync, synchronous commit and full page
    writes on, as in production, so a crash loses nothing committed.

    Raises:
        ServerError: the binaries are missing or the server would not start.
    """
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    data = root / "data"
    user = _server_user()
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
        root.chmod(0o700)
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
    settings = {**_SETTINGS, **(_DURABLE if durable else {})}
    options = " ".join(f"-c {name}={value}" for name, value in settings.items())
    options += f" -c port={port} -c unix_socket_directories={root}"
    _run(
        [
            find_bin("pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ],
        user,
    )
    (root / "port").write_text(str(port))
    (root / "options").write_text(options)
    return PgServer(root, port)


def stop(directory: str | os.PathLike[str]) -> None:
    """Stop the server started in ``directory`` (fast shutdown); quiet if it is not running."""
    root = Path(directory).resolve()
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
    data, log = str(root / "data"), str(root / "server.log")
    _run(
        [find_bin("pg_ctl"), "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start"],
        _server_user(),
    )


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
    pids = server_pids(directory)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def thaw(directory: str | os.PathLike[str]) -> None:
    """Resume every process of the server in ``directory`` (SIGCONT)."""
    for pid in server_pids(directory):
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
