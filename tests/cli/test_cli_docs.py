"""docs/cli.md's session is what ``wf`` prints: the suite runs it and compares."""

from __future__ import annotations

import enum
import itertools
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli.main import app
from workflow.schedules import Overlap

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"

RUN_ID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
MOMENT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
DURATION = re.compile(r"^\+?\d+(?:\.\d+)?(?:ms|s|m|h)$")


@dataclass
class Command:
    line: str
    output: list[str]
    code: int


def section(title: str) -> str:
    """The text of docs/cli.md's section ``## title``, up to the next ``## ``."""
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def commands(block: str) -> list[Command]:
    """The ``$ wf ...`` commands of a console block, with their output and exit code."""
    found: list[Command] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            found.append(Command(line[2:], [], -1))
        elif match := re.fullmatch(r"\[exit (\d+)\]", line):
            found[-1].code = int(match[1])
        elif line and found:
            found[-1].output.append(line)
    return found


def tokens(lines: list[str], ids: dict[str, str]) -> list[str]:
    """The words of ``lines`` with run ids numbered in order of appearance and times,
    ages and durations (which differ from one session to the next) as placeholders.

    Words, not lines: a table wraps a long cell at its own width, which moves a
    word to the next line but never out of order."""
    words = []
    for word in MOMENT.sub("<time>", "\n".join(lines)).split():
        word = RUN_ID.sub(lambda m: ids.setdefault(m[0], f"<run {len(ids) + 1}>"), word)
        words.append("<duration>" if DURATION.match(word) else word)
    return words


def wf(
    line: str, cwd: Path, *, columns: int = 100, world: str = "sqlite:///shop.db"
) -> tuple[int, list[str]]:
    """Run a documented ``wf ...`` line as the console does, in ``cwd``, in a terminal
    ``columns`` wide with ``$WORKFLOW_WORLD`` set to ``world``.

    In process (the subject is what it prints; tests/cli/test_cli.py runs each of these
    commands as the real entry point): stdout, then stderr, as a console shows a pipe's."""
    argv = shlex.split(line)
    assert argv[0] == "wf", line
    before, path = os.getcwd(), list(sys.path)
    os.chdir(cwd)
    try:
        done = CliRunner().invoke(
            app, argv[1:], env={"COLUMNS": str(columns), "WORKFLOW_WORLD": world}
        )
    finally:
        os.chdir(before)
        sys.path[:] = path  # `wf start` puts its directory first, as its own process would
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise AssertionError(f"{line} raised {done.exception!r}\n{done.output}")
    assert "Traceback" not in done.stderr, done.stderr
    return done.exit_code, (done.stdout + done.stderr).splitlines()


def run_worker_until_paid(cwd: Path, count: int) -> None:
    """``wf worker shop`` until ``count`` runs are at their timer (``stage=paid``)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{cwd}"}
    env["WORKFLOW_WORLD"] = "sqlite:///shop.db"
    worker = subprocess.Popen(
        [sys.executable, "-m", "cli", "worker", "shop"],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # a bound, not a measurement: a few seconds normally
            code, out = wf("wf runs list --attr stage=paid --json", cwd)
            if code == 0 and sum('"id"' in line for line in out) == count:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the worker did not bring the runs to their timer")
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def test_the_documented_session_prints_what_the_doc_shows(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    text = section("A session")
    (app,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    (block,) = re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL)
    (tmp_path / "shop.py").write_text(app)
    request.addfinalizer(lambda: sys.modules.pop("shop", None))
    documented: dict[str, str] = {}  # run id -> placeholder, for each side
    real: dict[str, str] = {}
    session = commands(block)
    starts = sum(command.line.startswith("wf start") for command in session[:4])
    assert starts == 4, "the session begins with its four starts, then the worker runs"
    for index, command in enumerate(session):
        if index == 4:
            run_worker_until_paid(tmp_path, count=3)
        expected = [line.replace("/home/me/shop", str(tmp_path)) for line in command.output]
        code, out = wf(command.line, tmp_path)
        assert (code, tokens(out, real)) == (command.code, tokens(expected, documented)), (
            f"$ {command.line}\n" + "\n".join(out)
        )


def documented_choices() -> list[tuple[tuple[str, ...], str, set[str]]]:
    """Each ``--option a\\|b\\|c`` of the command table: (command path, option, choices)."""
    found = []
    for usage in re.findall(r"^\| `wf ([^`]*)`", DOC.read_text(), flags=re.MULTILINE):
        words = usage.split()
        path = tuple(itertools.takewhile(lambda word: re.fullmatch(r"[a-z]+", word), words))
        for option, choices in re.findall(r"(--[a-z-]+) ([a-z_]+(?:\\\|[a-z_]+)+)", usage):
            found.append((path, option, set(choices.split("\\|"))))
    return found


def test_the_command_table_lists_every_choice_an_option_takes() -> None:
    """The choices the docs list for an option are the ones ``wf`` accepts, read from
    the command's own definition (an enum's members), so a new member shows up here."""
    found = documented_choices()
    assert (("schedules", "backfill"), "--overlap", {o.value for o in Overlap}) in found
    root = typer.main.get_command(app)
    for path, option, choices in found:
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        (param,) = [param for param in command.params if option in param.opts]
        accepted = param.type_descriptor.annotation  # type: ignore[attr-defined]
        if isinstance(accepted, type) and issubclass(accepted, enum.Enum):
            assert choices == {member.value for member in accepted}, (path, option)
        else:  # a plain string checked by the command: its help names each choice
            described = getattr(param, "help", None) or ""
            assert all(f"{choice} =" in described for choice in choices), (path, option)
