"""Checks of what callers send a world, with one message for each mistake."""

from __future__ import annotations

from worlds._rules.claims import check_window
from worlds._rules.rates import check_rates
from worlds._rules.slots import check_limits
from worlds.types import CreateRunRequest

__all__ = ["check_create", "run_exists", "successor_exists"]


def check_create(request: CreateRunRequest) -> None:
    """Raise ``ValueError`` if ``request`` contradicts itself; nothing is written then.

    Every unique key needs a value among the run's attributes, a start
    policy may only name one of the unique keys, and limited keys follow
    ``slots.check_limits``, rate-limited keys ``rates.check_rates``.
    """
    missing = sorted(request.unique - request.attributes.keys())
    if missing:
        raise ValueError(
            f"unique keys {missing} are not among the run's attributes; "
            "give each unique key a value or drop it from unique"
        )
    policy = request.policy
    if policy is not None and policy.key not in request.unique:
        raise ValueError(
            f"the policy's key {policy.key!r} is not among the unique keys; "
            "add it to unique or choose another policy key"
        )
    check_limits(request)
    check_rates(request)
    for key, window in request.windows.items():
        if key not in request.unique:
            raise ValueError(
                f"key {key!r} has a reuse window but is not unique; make it Unique(v, ...)"
            )
        check_window(key, window)
    debounce = request.debounce
    if debounce is not None:
        if debounce.key not in request.unique or policy is not None:
            raise ValueError(
                f"the debounce key {debounce.key!r} must be unique, and a debounced start "
                "takes no start policy"
            )
        if not 0 <= debounce.delay <= debounce.max_delay:
            raise ValueError(
                f"debounce needs 0 <= delay <= max_delay, got {debounce.delay} and "
                f"{debounce.max_delay}"
            )


def run_exists(run_id: str) -> ValueError:
    """The error ``create_run`` raises when ``run_id`` is already taken."""
    return ValueError(f"run {run_id} already exists; choose a new run id")


def successor_exists(run_id: str) -> ValueError:
    """The error a commit raises when its ``RunContinued`` names an existing run."""
    return ValueError(f"continue_as_new names an existing run {run_id}; choose a new run id")
