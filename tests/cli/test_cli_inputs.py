"""Bad values at every ``wf`` entry point: one ``error:`` line naming the bad part, exit 2.

Issue 24, item 3: URLs with a bad host or port (issue 25: or a bad list of
hosts), values the API refuses, ranges the wrong way round, bounds on delays,
and inputs echoed in errors.
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
    # multi-host URLs (failover, issue 25)
    "postgresql://a,,b/db": "an empty host",
    "postgresql://u@/db?host=a,b&port=1,2,3": "3 ports for 2 hosts",
    "postgresql://a,b/db?target_session_attrs=standby": "leads to standbys",
    "postgresql://a,b/db?target_session_attrs=read-only": "leads to standbys",
    "postgresql://a,b/db?target_session_attrs=prefer-standby": "leads to standbys",
    "postgresql://u:s3cretpw@a,b/db?target_session_attrs=bogus": "not 'bogus'",
}


@pytest.mark.parametrize("url", sorted(BAD_URLS))
def test_a_bad_postgres_host_or_port_is_named(url: str) -> None:
    with pytest.raises(ValueError, match="world URL") as caught:
        worlds.open(url)
    assert BAD_URLS[url] in str(caught.value)
    assert "s3cretpw" not in str(caught.value)


@pytest.mark.parametrize("url", sorted(BAD_URLS))
@pytest.mark.parametrize(
    "command", [["world", "info"], ["runs", "list"], ["worker", "examples.quickstart"]]
)
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
        "postgresql://a,b/db?target_session_attrs=primary",  # multi-host forms (failover)
        "postgresql://a,b/db?target_session_attrs=any",
        "postgresql://u@/db?host=a,b&port=5432,5433",
    ],
)
def test_good_postgres_hosts_and_ports_open(url: str) -> None:
    assert worlds.open(url) is not None


def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/w.db"
    assert wf("world", "migrate", "--world", url)[0] == 0
    return url


START = ["start", "examples.quickstart:checkout", '"o-1"', "1", "2"]
BIG = str(2**64 + 1)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--limit", "k=v:1e20"], "--limit"),
        (["--limit", f"k=v:{BIG}"], "1-1000000"),
        (["--attr", f"k={BIG}"], "64-bit"),
        (["--unique", f"k={BIG}"], "64-bit"),
        (["--limit", f"k={BIG}:2"], "64-bit"),
        (["--attr", "$name=has space"], "$name"),
        (["--attr", "$bogus=1"], "reserved"),
        (["--delay", "inf"], "delay must be 0 seconds to 100 years"),
        (["--delay", "4e9"], "delay must be 0 seconds to 100 years"),
        (["--unique", f"k={BIG}", "--policy", "get"], "64-bit"),
    ],
)
def test_bad_values_to_start_exit_2_and_write_nothing(
    tmp_path: Path, args: list[str], names: str
) -> None:
    url = migrated(tmp_path)
    got, output = wf(*START, *args, "--world", url)
    assert got == 2, output
    assert names in error_line(output)
    got, output = wf("runs", "list", "--json", "--world", url)
    assert got == 0 and '"runs": []' in output


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["attributes", "holders", "$bogus", "v"], "reserved"),
        (["attributes", "holders", "k", BIG], "64-bit"),
        (["attributes", "holders", "x" * 300, "v"], "1-256"),
        (["runs", "show", "$name=has space"], "$name"),
        (["runs", "show", f"k={BIG}"], "64-bit"),
        (["runs", "events", "$bogus=1"], "reserved"),
    ],
)
def test_a_pair_no_run_can_hold_is_a_usage_error(
    tmp_path: Path, args: list[str], names: str
) -> None:
    got, output = wf(*args, "--world", migrated(tmp_path))
    assert got == 2, output
    assert names in error_line(output)


def test_holders_of_a_valid_pair_nobody_holds_is_an_answer(tmp_path: Path) -> None:
    """Keys are any text of 1-256 characters (RFC 0003): ``bad key!`` is a key nobody holds."""
    got, output = wf("attributes", "holders", "bad key!", "v", "--world", migrated(tmp_path))
    assert got == 0 and "nobody holds" in output


@pytest.mark.parametrize("option", [["runs", "show"], ["runs", "events"]])
@pytest.mark.parametrize("spec", ["5-1", "10-2"])
def test_an_event_range_the_wrong_way_round_exits_2(
    tmp_path: Path, option: list[str], spec: str
) -> None:
    url = migrated(tmp_path)
    got, output = wf(*START, "--world", url)
    assert got == 0, output
    run_id = output.strip().splitlines()[-1]
    flag = "--events" if option[1] == "show" else "--range"
    got, output = wf(*option, run_id, flag, spec, "--world", url)
    assert got == 2, output
    assert "wrong way round" in error_line(output) and flag in error_line(output)


@pytest.mark.parametrize("before", ["2030-01-01", "2030-01-01T00:00:00+02:00", "now", "7d"])
def test_runs_prune_takes_iso_times_naive_meaning_utc(tmp_path: Path, before: str) -> None:
    got, output = wf("runs", "prune", "--before", before, "--world", migrated(tmp_path))
    assert got == 0, output
    if before == "2030-01-01":
        assert "2030-01-01T00:00:00+00:00" in output


def test_runs_prune_refuses_a_malformed_time(tmp_path: Path) -> None:
    got, output = wf("runs", "prune", "--before", "2030-13-01", "--world", migrated(tmp_path))
    assert got == 2 and "--before" in error_line(output)


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "show", "r" * 5000],
        ["runs", "show", "$name=" + "n " * 2500],
        ["start", *START[1:], "--limit", "k" * 5000],
        ["start", *START[1:], "--attr", "$" + "k" * 5000 + "=1"],
        ["attributes", "holders", "$" + "k" * 5000, "v"],
    ],
)
def test_an_error_cuts_an_oversized_input(tmp_path: Path, args: list[str]) -> None:
    got, output = wf(*args, "--world", migrated(tmp_path))
    assert got in (1, 2), output
    line = error_line(output)
    assert len(line) < 400, line
    if args[-1].startswith(("r", "k")):  # the inputs the message quotes
        assert "characters)" in line, line
