"""What a world loading dumped rows refuses, and the order it writes them in.

Pure decisions for ``World.import_rows`` (the flow is ``worlds._flows.archive``):
a batch is written kind by kind in ``worlds.archive.ROW_ORDER``; every row of
a run comes with the run (a batch is self-contained, so a run never arrives
without its rows or half of them); and nothing already in the world is
overwritten: a run id, a claimed pair, a hook token or a schedule id that the
world holds refuses the whole batch, naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from worlds.archive import ROW_ORDER, DumpedRun, DumpRow, row_run_id

__all__ = ["check_batch", "present_refusal", "setting_refusal"]

_RANK = {kind: rank for rank, kind in enumerate(ROW_ORDER)}


def check_batch(batch: Sequence[DumpRow]) -> list[DumpRow]:
    """``batch`` in the order it is written (kinds in ``ROW_ORDER``, stable).

    Raises:
        TypeError: a row is not a dump row.
        ValueError: a run comes twice, or a row names a run the batch lacks.
    """
    runs: set[str] = set()
    for row in batch:
        if type(row) not in _RANK:
            raise TypeError(f"not a dump row: {type(row).__name__}")
        if isinstance(row, DumpedRun):
            if row.record.id in runs:
                raise ValueError(f"run {row.record.id} comes twice in the rows to import")
            runs.add(row.record.id)
    for row in batch:
        owner = row_run_id(row)
        if owner is not None and owner not in runs:
            raise ValueError(
                f"a {type(row).__name__} row names run {owner}, which the rows to import lack"
            )
    return sorted(batch, key=lambda row: _RANK[type(row)])


def present_refusal(what: str, present: Iterable[str]) -> str | None:
    """The error for importing ``what`` (``run``, ``claim``, ...) the world already
    holds, or ``None`` when it holds none of them."""
    names = sorted(present)
    if not names:
        return None
    more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
    return f"{what} {names[0]}{more} is already in this world; nothing was imported"


def setting_refusal(key: str, stored: str | None, value: str) -> str | None:
    """The error for importing setting ``key`` as ``value`` over ``stored``: settings
    are written once, so a different stored value refuses (a world with another
    payload codec cannot take these bytes)."""
    if stored is None or stored == value:
        return None
    return (
        f"setting {key!r} is {stored!r} in this world but {value!r} in the rows to import; "
        "nothing was imported"
    )
