"""A throwaway PostgreSQL server for the tests and benchmarks.

``start(directory)`` creates a cluster with ``initdb`` under ``directory`` and
starts it with ``pg_ctl``: a unix socket in ``directory`` and 127.0.0.1 on a
free port, trust authentication, ``fsync=off`` (the data is thrown away).
``stop(directory)`` stops it. PostgreSQL refuses to run as root, so under
root the server runs as the ``postgres`` user (created with ``useradd`` when
missing, else ``nobody``), which then owns ``directory``.

Usage::

    python -m tests.pg_server start DIR     # prints the server's URL
    python -m tests.pg_server stop DIR
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PgServer", "ServerError", "find_bin", "restart", "start", "stop"]

_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "listen_addresses": "127.0.0.1",
}


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
    ids = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid}
    env = {**os.environ, "LC_ALL": "C"}
    if user is not None:
        env["HOME"] = "/tmp"
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, **ids)
    if done.returncode != 0:
        raise ServerError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def start(directory: str | os.PathLike[str]) -> PgServer:
    """Create and start a cluster in ``directory`` (created if missing; must be empty).

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
    options = " ".join(f"-c {name}={value}" for name, value in _SETTINGS.items())
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
    return PgServer(root, port)


def stop(directory: str | os.PathLike[str]) -> None:
    """Stop the server started in ``directory`` (fast shutdown); quiet if it is not running."""
    root = Path(directory).resolve()
    data = root / "data"
    if not (data / "postmaster.pid").exists():
        return
    _run([find_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], _server_user())


def restart(directory: str | os.PathLike[str], mode: str = "immediate") -> None:
    """Restart the server started in ``directory``; ``immediate`` is a crash and recovery.

    Raises:
        ServerError: the server would not restart.
    """
    root = Path(directory).resolve()
    user = _server_user()
    ids = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid}
    command = [find_bin("pg_ctl"), "-D", str(root / "data"), "-l", str(root / "server.log")]
    # a minimal environment: with the test run's own, pg_ctl restart never returns
    env = {"HOME": "/tmp", "PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    done = subprocess.run(
        [*command, "-m", mode, "-w", "-t", "60", "restart"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd="/tmp",
        check=False,
        timeout=120,
        **ids,
    )
    if done.returncode != 0:
        raise ServerError(f"pg_ctl restart failed:\n{done.stdout}\n{done.stderr}")


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
