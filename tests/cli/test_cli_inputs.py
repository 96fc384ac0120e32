"""Bad values at every ``wf`` entry point: one ``error:`` line naming the bad part, exit 2.

Issue 24, item 3: URLs with a bad host or port, values the API refuses,
ranges the wrong way round, bounds on delays, and inputs echoed in errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import worlds
from tests.cli.test_cli_errors import error_line, wf

BAD_URLS = {
    "postgresql://u:s3cretpw@localhost:99999/db": "port '99999'",
    "postgresql://localhost:-1/db": "port '-1'",
    "postgresql://localhost:abc/db": "port 'abc'",
    "postgresql://localhost:/db": "port ''",
    "postgresql://[::1/db": "host '[::1'",
    "postgresql://[::1]x/db": "host '[::1]x'",
    "postgresql://a:5432,b:70000/db": "port '70000' of host 'b'",
}


@pytest.mark.parametrize("url", sorted(BAD_URLS))
def test_a_bad_postgres_host_or_port_is_named(url: str) -> None:
    with pytest.raises(ValueError, match="malformed world URL") as caught:
        worlds.open(url)
    assert BAD_URLS[url] in str(caught.value)
    assert "s3cretpw" not in str(caught.value)


@pytest.mark.parametrize("url", sorted(BAD_URLS))
@pytest.mark.parametrize("command", [["world", "info"], ["runs", "list"], ["worker", "examples.quickstart"]])
def test_wf_refuses_a_bad_postgres_host_or_port_with_exit_2(url: str, command: list[str]) -> None:
    got, output = wf(*command, "--world", url)
    assert got == 2, output
    line = error_line(output)
    assert BAD_URLS[url] in line and "s3cretpw" not in line


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@[::1]:5432/db",
        "postgresql://u@[::1]/db",
        "postgresql://a:1,b:65535,c/db",
        "postgresql:///db?host=/tmp",
        "postgresql://u:p:w@h:5432/db",
    ],
)
def test_good_postgres_hosts_and_ports_open(url: str) -> None:
    assert worlds.open(url) is not None
