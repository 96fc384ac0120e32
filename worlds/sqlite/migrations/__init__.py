"""The frozen migrations of the SQLite world's schema, one module per version.

``MIGRATIONS[v]`` is the literal SQL that produces schema version ``v`` from
version ``v - 1``; version 1 is the initial schema. Module ``v<NN>_<what>``
holds version ``NN``'s ``STATEMENTS`` and says in its docstring what the
version does and why. The text is frozen: it is what each version was when it
shipped, and never changes with today's schema. A change to the schema is a
new module here, mirrored in ``worlds.sqlite.schema.SCHEMA`` (what a new
database is created with); ``tests/worlds/test_sqlite_migrations.py`` checks
that both paths agree.
"""

from __future__ import annotations

from worlds.sqlite.migrations import (
    v01_initial,
    v02_released_claims,
    v03_hooks,
    v04_flow_control,
    v05_schedules,
    v06_streams,
    v07_holds,
    v08_settings,
    v09_rate_limits,
    v10_workers,
    v11_key_limits,
    v12_updates,
    v13_deployments,
    v14_ui_indexes,
    v15_key_lines,
    v16_slot_history,
    v17_admission_times,
)

__all__ = ["MIGRATIONS"]

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: v01_initial.STATEMENTS,
    2: v02_released_claims.STATEMENTS,
    3: v03_hooks.STATEMENTS,
    4: v04_flow_control.STATEMENTS,
    5: v05_schedules.STATEMENTS,
    6: v06_streams.STATEMENTS,
    7: v07_holds.STATEMENTS,
    8: v08_settings.STATEMENTS,
    9: v09_rate_limits.STATEMENTS,
    10: v10_workers.STATEMENTS,
    11: v11_key_limits.STATEMENTS,
    12: v12_updates.STATEMENTS,
    13: v13_deployments.STATEMENTS,
    14: v14_ui_indexes.STATEMENTS,
    15: v15_key_lines.STATEMENTS,
    16: v16_slot_history.STATEMENTS,
    17: v17_admission_times.STATEMENTS,
}
"""The statements that produce each schema version from the one before."""
