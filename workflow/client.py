"""The client: start runs and look at them from outside a workflow.

One import for the client's parts: ``start`` (``workflow._start``), the ``Run``
handle (``workflow._run``), the lookups and hooks (``workflow._lookups``) and
the choice of world (``workflow._world_resolution``), the bulk actions
(``workflow._operations``) and retention (``workflow._retention``). Every function takes
``world=None``: a world from ``worlds.open(url)``, or by default the one in
force (the worker's, inside a step; else ``$WORKFLOW_WORLD``; else the
embedded SQLite file).
"""

from workflow._lookups import (
    RunList,
    find_run,
    get_run,
    list_hooks,
    list_runs,
    list_workers,
    release_claims,
    resume_hook,
)
from workflow._operations import cancel_runs, prune_runs, retry_runs
from workflow._retention import get_retention, set_retention
from workflow._run import Run
from workflow._start import start
from workflow._world_resolution import resolve_world

__all__ = [
    "Run",
    "RunList",
    "cancel_runs",
    "find_run",
    "get_retention",
    "get_run",
    "list_hooks",
    "list_runs",
    "list_workers",
    "prune_runs",
    "release_claims",
    "resolve_world",
    "resume_hook",
    "retry_runs",
    "set_retention",
    "start",
]
