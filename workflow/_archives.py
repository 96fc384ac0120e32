"""Archives and moving worlds: ``export_runs``, ``import_runs`` and ``copy_world``.

All three stream a world's dump (``World.export_rows``, the rows of
``worlds.archive``) and load it with ``World.import_rows``, so they work
between any two worlds, a backend's own or a third party's. An exported run
is one JSON line (``worlds.archive.ArchivedRun``): its record, attributes,
claims and log to read, and its exact rows, which import and ``replay`` use.
Payloads travel as the world stored them: a codec world's stay encoded.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import worlds
from workflow._lookups import list_runs
from workflow._world_resolution import resolve_world
from workflow.query import Expr
from worlds.archive import (
    DumpedRun,
    DumpedSetting,
    DumpRow,
    archive_run,
    decode_archived,
    encode_archived,
    row_run_id,
)
from worlds.protocol import World

__all__ = ["copy_world", "export_runs", "import_runs"]

Progress = Callable[[int, int | None], None]
"""Called as work goes: (runs done, runs in all or ``None`` if not known)."""

_RUNS_PER_IMPORT = 100
"""Exported runs written per ``import_rows`` call (one transaction)."""


async def export_runs(
    query: str | Expr | None,
    fp: IO[bytes] | IO[str] | str | os.PathLike[str],
    *,
    world: World | None = None,
    progress: Progress | None = None,
) -> int:
    """Write every run matching ``query`` to ``fp``, one JSON line per run; the count.

    Each line (``worlds.archive.ArchivedRun``) holds the run's record, attributes,
    claims and full event log, and its exact rows (work items, hooks, slots,
    streams too), so ``import_runs`` restores it into any world and ``replay``
    takes it as a history. The runs are read a page at a time, never all at once.

    Args:
        query: a filter in the language of ``workflow.query`` (``None``: every run).
        fp: a file open for writing (binary or text), or a path to create.
        world: the world to read; by default the configured one.
        progress: called after each page with (runs written, ``None``).

    Raises:
        QuerySyntaxError: ``query`` is malformed (a ``ValueError``), before anything
            is written.
    """
    source = resolve_world(world)
    with _opened(fp, "w") as out:
        written, cursor = 0, None
        while True:
            page = await list_runs(query=query, limit=200, cursor=cursor, world=source)
            ids = [run.id for run in page]
            rows_of: dict[str, list[DumpRow]] = {}
            async for row in source.export_rows(ids):
                owner = row_run_id(row)
                if owner is not None:  # each run's list starts with its DumpedRun
                    rows_of.setdefault(owner, []).append(row)
            for run_id in ids:
                if run_id in rows_of:  # gone since it was listed: not exported
                    _write_line(out, encode_archived(archive_run(rows_of[run_id])))
                    written += 1
            if progress is not None:
                progress(written, None)
            cursor = page.next_cursor
            if cursor is None:
                return written


async def import_runs(
    fp: IO[bytes] | IO[str] | str | os.PathLike[str],
    *,
    world: World | None = None,
    progress: Progress | None = None,
) -> int:
    """Restore the runs ``export_runs`` wrote into ``world``, ids kept; the count.

    When ``fp`` can be read twice (a path, a seekable file), every run is checked
    first and nothing is written if one is already in ``world``; otherwise each
    batch of runs is one transaction, refused whole when it holds a run (or a
    claimed pair, a hook token) the world has.

    Raises:
        ValueError: a line is not an exported run, or ``world`` already holds one
            of the runs (named), its claimed pairs or hook tokens.
    """
    target = resolve_world(world)
    with _opened(fp, "r") as src:
        if src.seekable():
            present: list[str] = []
            batch: list[str] = []
            for archived in _archived_lines(src):
                batch.append(archived.id)
                if len(batch) >= _RUNS_PER_IMPORT:
                    present += await _present(target, batch)
                    batch = []
            present += await _present(target, batch)
            if present:
                more = f" (and {len(present) - 1} more)" if len(present) > 1 else ""
                raise ValueError(
                    f"run {present[0]}{more} is already in this world; nothing was imported"
                )
            src.seek(0)
        done, rows, runs = 0, [], 0
        for archived in _archived_lines(src):
            rows += archived.dump()
            runs += 1
            if runs >= _RUNS_PER_IMPORT:
                await target.import_rows(rows)
                done, rows, runs = done + runs, [], 0
                if progress is not None:
                    progress(done, None)
        if rows:
            await target.import_rows(rows)
            done += runs
        if progress is not None:
            progress(done, None)
        return done


async def copy_world(
    src: World | str,
    dst: World | str,
    *,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Copy everything world ``src`` holds into the empty world ``dst``; the rows
    copied per kind (``run``, ``claim``, ``work``, ... as ``worlds.archive`` tags them).

    Runs open and closed with their logs and attributes, claims with their
    generations, tombstones, slots and waiters, rate tokens, hooks and their
    unread payloads, streams, schedules and settings are copied as they are;
    leases are not (work leased in ``src`` is due at once in ``dst``) and neither
    are registered workers. Stop the workers of ``src`` first, copy, then start
    them on ``dst``: every open run carries on there. Streams a page of runs at
    a time (each page one transaction in ``dst``) and, at the end, counts what
    ``dst`` holds against what was read.

    Args:
        src: the world to copy, or its URL.
        dst: the world to fill, or its URL; it must hold nothing but settings.
        progress: called after each page with (runs copied, runs in ``src``).

    Raises:
        ValueError: ``dst`` is not empty (nothing is written), or is ``src``.
        RuntimeError: ``dst`` does not hold what was copied (the counts differ).
    """
    source = worlds.open(src) if isinstance(src, str) else src
    target = worlds.open(dst, create=True) if isinstance(dst, str) else dst
    if source is target or source.url == target.url:
        raise ValueError(f"cannot copy {source.url!r} into itself")
    async with source, target:
        async for row in target.export_rows():
            if not isinstance(row, DumpedSetting):
                owner = row_run_id(row) or "its own rows"
                raise ValueError(
                    f"{target.url!r} is not empty (it holds {owner}): copy into an empty world; "
                    "nothing was copied"
                )
        info = await source.info()
        total = sum(int(v) for k, v in info.items() if k.startswith("runs."))
        copied: Counter[str] = Counter()
        runs = 0
        batch: list[DumpRow] = []
        mixed = False  # the batch holds rows after its runs: a new run starts a new page

        async def flush() -> None:
            nonlocal batch, mixed
            if batch:
                await target.import_rows(batch)
                copied.update(_tag(row) for row in batch)
            batch, mixed = [], False
            if progress is not None:
                progress(runs, total)

        async for row in source.export_rows():
            if isinstance(row, DumpedRun):
                if mixed:
                    await flush()
                runs += 1
            elif not isinstance(row, DumpedSetting):
                mixed = True
            batch.append(row)
        await flush()
        held: Counter[str] = Counter()
        async for row in target.export_rows():
            held[_tag(row)] += 1
        wrong = {
            kind: (count, held[kind])
            for kind, count in copied.items()
            if kind != "setting" and held[kind] != count
        }
        if wrong:
            detail = ", ".join(f"{k}: {a} copied, {b} there" for k, (a, b) in sorted(wrong.items()))
            raise RuntimeError(f"the copy into {target.url!r} is incomplete: {detail}")
        return dict(sorted(copied.items()))


def _tag(row: DumpRow) -> str:
    tag = type(row).__struct_config__.tag
    assert isinstance(tag, str)
    return tag


async def _present(world: World, run_ids: list[str]) -> list[str]:
    found = []
    for run_id in run_ids:
        if await world.get_run(run_id) is not None:
            found.append(run_id)
    return found


class _Opened:
    """A file ``export_runs``/``import_runs`` reads or writes: given, or opened by path."""

    def __init__(self, fp: Any, mode: str) -> None:
        self._own = isinstance(fp, (str, os.PathLike))
        self._fp = open(fp, mode + "b") if self._own else fp  # noqa: SIM115 - closed in __exit__

    def __enter__(self) -> Any:
        return self._fp

    def __exit__(self, *exc: object) -> None:
        if self._own:
            self._fp.close()


def _opened(fp: Any, mode: str) -> _Opened:
    return _Opened(fp, mode)


def _write_line(out: Any, line: bytes) -> None:
    if isinstance(out, io.TextIOBase):
        out.write(line.decode() + "\n")
    else:
        out.write(line + b"\n")


def _archived_lines(src: Iterable[bytes | str]) -> Iterator[Any]:
    for number, line in enumerate(src, start=1):
        if not line.strip():
            continue
        try:
            yield decode_archived(line)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
