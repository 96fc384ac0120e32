"""Pinned deployments: which build's workers may lease a run's tasks (RFC 0025).

A worker may carry a build id. A run records the build of the worker that leased
its first task, and its workflow's ``pin`` in that build: ``run`` keeps every
later task on workers of that build; ``latest`` lets the newest build take its
next task (the run then records that build). A worker without a build id leases
only runs that recorded none: without build ids everything is as before.

The *newest build* is the build id of the most recently registered worker that
is neither stopped nor dead (``worlds._rules.liveness.is_dead``): deploying v2
makes it the newest as its first worker registers; rolling back (stopping v2,
starting v1 workers again) makes v1 the newest again. A build whose workers all
stopped or died is no longer newest, so new runs fall back to the build still
served. New runs (no build recorded yet) go to the newest build only, so the
old build's workers, still serving their pinned runs, take no new ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from worlds._rules.liveness import Beat, is_dead
from worlds.types import Pin

__all__ = ["check_workflows", "live", "may_lease", "needs", "newest", "pin_of", "records"]


def live(worker: Beat, others: Iterable[Beat]) -> bool:
    """Whether ``worker`` serves its build: neither stopped nor dead."""
    return not worker.stopped and not is_dead(worker, others)


def newest(workers: Iterable[Beat]) -> str | None:
    """The newest build: that of the most recently registered live worker with a build
    id (ties: the greater id); ``None`` when no such worker is registered."""
    everyone = list(workers)
    serving = [w for w in everyone if w.info.build_id is not None and live(w, everyone)]
    if not serving:
        return None
    latest = max(serving, key=lambda w: (w.started_at, w.info.id))
    return latest.info.build_id


def may_lease(
    run_build: str | None, run_pin: Pin | None, build: str | None, top: str | None
) -> bool:
    """Whether a worker of ``build`` (``None``: it has none) may lease an item of a run
    that recorded ``run_build`` and ``run_pin``, ``top`` being the newest build.

    - a worker without a build: only runs that recorded none (as before build ids);
    - a run that recorded none yet: a worker of the newest build (or of any build
      while none is newest: the leaser is not registered);
    - a ``pin="run"`` run: workers of its build only, whatever is newest;
    - a ``pin="latest"`` run: workers of the newest build.
    """
    if build is None:
        return run_build is None
    if run_build is None:
        return top is None or build == top
    if run_pin == "latest":
        return build == (top or run_build)
    return build == run_build


def pin_of(recorded: Mapping[str, Pin] | None, workflow: str) -> Pin:
    """The pin a run of ``workflow`` records when a build whose workflows are
    ``recorded`` leases it: the workflow's own, else ``run`` (the safe one)."""
    return (recorded or {}).get(workflow, "run")


def records(
    workflow: str,
    run_build: str | None,
    run_pin: Pin | None,
    build: str | None,
    recorded: Mapping[str, Pin] | None,
) -> tuple[str, Pin] | None:
    """What a run of ``workflow`` that recorded ``run_build`` and ``run_pin`` records
    when a worker of ``build`` (whose build's workflows are ``recorded``) leases one of
    its items: that build and the workflow's pin in it, the first time or when a
    ``latest`` run moves; ``None``: nothing changes."""
    if build is None or run_build == build:
        return None
    if run_build is not None and run_pin != "latest":
        return None  # pinned elsewhere: never leased here (``may_lease``)
    return build, pin_of(recorded, workflow)


def needs(run_pin: Pin | None, build: str, top: str | None) -> bool:
    """Whether an open run that recorded ``build`` and ``run_pin`` still needs that
    build's workers: pinned to it, or ``latest`` while it is still the newest."""
    return run_pin != "latest" or top in (None, build)


def check_workflows(build: str, recorded: Iterable[str] | None, offered: Iterable[str]) -> None:
    """Refuse a worker of ``build`` whose workflows' names differ from those recorded
    for ``build`` (``None``: its first worker): two codebases under one build id.

    Raises:
        ValueError: the names differ; the message lists what differs.
    """
    if recorded is None:
        return
    before, now = set(recorded), set(offered)
    if before == now:
        return
    missing, extra = sorted(before - now), sorted(now - before)
    raise ValueError(
        f"build {build!r} was registered with other workflows: this worker lacks "
        f"{missing or 'none'} and adds {extra or 'none'}; deploy different code under a "
        "new build id"
    )
