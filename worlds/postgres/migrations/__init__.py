"""The frozen migrations of the PostgreSQL world's schema, one module per version.

``MIGRATIONS[v]`` holds the statements that take a schema from version
``v - 1`` to version ``v``; version 1 is the initial schema. Module
``v<NN>_<what>`` holds version ``NN``'s ``STATEMENTS`` and says in its
docstring what the version does and why. The text is literal and frozen: it
is what every database at version ``v`` ran, so it is never edited
(``tests/worlds/test_postgres_migrations.py`` pins each version's digest). A
change to the schema (a table, an index, a PL/pgSQL function) is a new
module here, with ``CREATE OR REPLACE`` for functions, and the function's
live text in ``worlds.postgres.functions`` follows it.
"""

from __future__ import annotations

from worlds.postgres.migrations import (
    v01_initial,
    v02_hooks,
    v03_commit_run,
    v04_server_clock,
    v05_create_run,
    v06_flow_control,
    v07_schedules,
    v08_streams,
    v09_conditional_commits,
    v10_holds,
    v11_settings,
    v12_rate_limits,
    v13_workers,
    v14_key_limits,
    v15_updates,
    v16_deployments,
    v17_ui_indexes,
    v18_key_lines,
    v19_slot_history,
    v20_admission_times,
)

__all__ = ["MIGRATIONS"]

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: v01_initial.STATEMENTS,
    2: v02_hooks.STATEMENTS,
    3: v03_commit_run.STATEMENTS,
    4: v04_server_clock.STATEMENTS,
    5: v05_create_run.STATEMENTS,
    6: v06_flow_control.STATEMENTS,
    7: v07_schedules.STATEMENTS,
    8: v08_streams.STATEMENTS,
    9: v09_conditional_commits.STATEMENTS,
    10: v10_holds.STATEMENTS,
    11: v11_settings.STATEMENTS,
    12: v12_rate_limits.STATEMENTS,
    13: v13_workers.STATEMENTS,
    14: v14_key_limits.STATEMENTS,
    15: v15_updates.STATEMENTS,
    16: v16_deployments.STATEMENTS,
    17: v17_ui_indexes.STATEMENTS,
    18: v18_key_lines.STATEMENTS,
    19: v19_slot_history.STATEMENTS,
    20: v20_admission_times.STATEMENTS,
}
"""The statements of each schema version, applied in order to reach it."""
