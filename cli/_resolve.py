"""What every command shares: the ``--world`` option, argument parsing, RUN resolution,
and the one place where errors become messages and exit codes.

Exit codes: 0 success; 1 an error (unknown or ambiguous run, a conflict, a
failed run, a world that cannot serve a query); 2 a usage error (bad options,
a malformed query, a bad value).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NoReturn, TypeVar

import anyio
import typer

import worlds
from workflow import Run, RunNotFoundError, WorkflowError, find_run, get_run, list_runs
from workflow.query import QuerySyntaxError
from worlds import World
from worlds.errors import WorldError, as_world_error
from worlds.quoting import quoted

from ._output import err_console, markup_safe

__all__ = [
    "EXIT_ERROR",
    "EXIT_USAGE",
    "CliError",
    "WorldOption",
    "execute",
    "open_world",
    "parse_pair",
    "parse_time",
    "parse_value",
    "resolve_run",
    "usage_errors",
]

EXIT_ERROR = 1
EXIT_USAGE = 2

WorldOption = Annotated[
    str | None,
    typer.Option(
        "--world",
        envvar="WORKFLOW_WORLD",
        show_envvar=True,
        help="World URL, e.g. sqlite:///app.db (default: $WORKFLOW_WORLD, then "
        "sqlite:///.workflow/world.db).",
    ),
]

T = TypeVar("T")

_opened: list[str] = []
"""The (redacted) URLs of the worlds this command opened, for error messages."""


class CliError(Exception):
    """A user-facing error: printed as ``error: MESSAGE`` and exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Raise a ``CliError``."""
    raise CliError(message, code)


@contextmanager
def usage_errors() -> Iterator[None]:
    """Turn the API's refusal of a value the user typed into a usage error (exit 2).

    Around a call whose arguments came from the command line, a plain
    ``ValueError`` or ``TypeError`` (a key, value, count or delay out of range)
    means the command was given a bad value; the API's own errors (conflicts,
    unknown runs, world failures) pass through unchanged.
    """
    try:
        yield
    except (WorkflowError, WorldError):
        raise
    except (ValueError, TypeError) as exc:
        if _driver_error(exc) is not None or as_world_error(exc) is not None:
            raise
        raise CliError(str(exc) or type(exc).__name__, EXIT_USAGE) from None


def open_world(url: str | None, *, create: bool = True) -> World:
    """The world at ``url`` (unopened), which must outlive this command.

    Only commands that write a new run or a schema (``start``, ``worker``,
    ``world migrate``) create the world; every other command passes
    ``create=False``, so a world that does not exist is an error naming it,
    and nothing is created. A ``memory://`` world is refused: it would be
    thrown away when the command exits. A bad URL is a usage error (exit 2).
    """
    try:
        opened = worlds.open(url, create=create, shared=True)
        _opened.append(worlds.redact_url(opened.url))
        return opened
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except WorldError as exc:
        raise CliError(str(exc)) from None


def execute(body: Callable[[], Awaitable[T]]) -> T:
    """Run ``body`` on an event loop, turning user errors into messages and exit codes.

    Never shows a traceback for an error the user can fix: a malformed query
    (exit 2, with a caret under the offending position), an unknown run,
    a conflict, or anything the world refuses (exit 1).
    """
    _opened.clear()
    try:
        return anyio.run(body)
    except CliError as exc:
        _report(str(exc), exc.code)
    except QuerySyntaxError as exc:
        _report(f"malformed query: {exc}", EXIT_USAGE, caret=True)
    except NotImplementedError as exc:
        _report(f"this world cannot serve that query: {exc}", EXIT_ERROR)
    except RecursionError:
        _report("a value is nested too deeply to handle", EXIT_ERROR)
    except Exception as exc:
        world_error = as_world_error(exc) or _driver_error(exc)
        if world_error is not None:
            where = f"world {_opened[-1]}" if _opened else "world"
            _report(f"{where}: {world_error}", EXIT_ERROR)
        if isinstance(exc, (WorkflowError, ValueError, TypeError, LookupError, TimeoutError)):
            _report(str(exc) or type(exc).__name__, EXIT_ERROR)
        raise


def _driver_error(exc: Exception) -> WorldError | None:
    """A database driver's error ``as_world_error`` does not classify, as a ``WorldError``.

    Recognised by the attributes drivers put on their errors (asyncpg's
    ``sqlstate``, sqlite3's ``sqlite_errorname``), so no driver is imported.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        return WorldError(f"PostgreSQL: {exc} (SQLSTATE {sqlstate})")
    if isinstance(getattr(exc, "sqlite_errorname", None), str):
        return WorldError(f"SQLite: {exc}")
    return None


def _report(message: str, code: int, *, caret: bool = False) -> NoReturn:
    """Print ``error: MESSAGE`` (URLs' passwords masked) and exit with ``code``.

    One line, except a query's (with ``caret``): the query and a caret under the error.
    """
    message = worlds.redact_url(message)
    text = markup_safe(message if caret else message.split("\n", 1)[0], keep_newlines=caret)
    err_console.print(f"[bold red]error:[/] {text}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


# --------------------------------------------------------------------------- parsing


def parse_value(text: str) -> Any:
    """An attribute value from the command line.

    JSON numbers, ``true``, ``false`` and ``null`` become those values, and a
    JSON string (``'"42"'``) becomes that string; anything else is taken as
    the literal string. So ``tier=1`` is the int 1, ``customer=c-9`` the string
    ``"c-9"``, and ``code='"007"'`` the string ``"007"``.
    """
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return text


def parse_pair(text: str, option: str = "--attr") -> tuple[str, Any]:
    """``key=value`` -> (key, parsed value); a usage error without ``=``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CliError(f"{option} takes KEY=VALUE, got {quoted(text)}", EXIT_USAGE)
    return key, parse_value(value)


_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_time(text: str, option: str) -> datetime:
    """An instant: ISO 8601 (no offset means UTC), ``now``, or a time ago like ``2h``.

    Relative units: ``s``, ``m``, ``h``, ``d``, ``w`` (``30m`` is thirty minutes ago).
    """
    text = text.strip()
    now = datetime.now(UTC)
    if text.lower() == "now":
        return now
    relative = _RELATIVE.fullmatch(text)
    if relative:
        amount, unit = float(relative.group(1)), relative.group(2)
        return now - timedelta(**{_UNITS[unit]: amount})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"{option} takes an ISO time (2024-05-01T12:00Z) or an age like 30m, 2h, 7d; "
            f"got {quoted(text)}",
            EXIT_USAGE,
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


# --------------------------------------------------------------------------- RUN


async def _exists(run: Run[Any]) -> bool:
    try:
        await run.status()
    except RunNotFoundError:
        return False
    return True


async def resolve_run(world: World, spec: str) -> Run[Any]:
    """The run that ``spec`` names: a run id, a ``$name`` value, or ``key=value``.

    ``key=value`` finds the holder of that unique pair; failing that, the one
    run whose attribute ``key`` is ``value``.

    Raises:
        CliError: no run matches, or more than one does (exit code 1).
    """
    if "=" in spec:
        key, value = parse_pair(spec, "RUN")
        with usage_errors():
            holder = await find_run(key, value, world=world)
        if holder is not None:
            return holder
        page = await list_runs(attributes={key: value}, limit=6, world=world)
        if len(page) == 1:
            return page.runs[0]
        if not page.runs:
            fail(f"no run has {key}={quoted(value)}")
        ids = ", ".join(run.id for run in page.runs[:5])
        more = " and more" if page.next_cursor or len(page) > 5 else ""
        fail(f"{key}={quoted(value)} is ambiguous: runs {ids}{more} have it; pass a run id")
    by_id = get_run(spec, world=world)
    found_by_id = await _exists(by_id)
    by_name = None
    if re.fullmatch(r"[A-Za-z0-9._:\-]{1,191}", spec):
        by_name = await find_run("$name", spec, world=world)
    if by_name is not None and found_by_id and by_name.id != by_id.id:
        fail(
            f"{quoted(spec)} is ambiguous: it is run {by_id.id} and the $name of run {by_name.id}; "
            f"pass '$name={spec}' or the id"
        )
    if found_by_id:
        return by_id
    if by_name is not None:
        return by_name
    fail(f"no run {quoted(spec)}: not a run id, a $name, or KEY=VALUE")
