"""Start-or-resume by attribute: deliver to the open holder's hook, or create the run.

``World.start_or_resume_hook(request, delivery)`` is one atomic operation over
the unique pair named by ``request.policy.key``:

1. a ``delivery.resume_id`` seen before for ``delivery.token`` answers the run
   it went to, and nothing is written (exactly once per resume id);
2. an open run holding the pair gets the payload (``delivered``);
3. otherwise the run of ``request`` is created as ``create_run`` would (the
   policy may take the pair over from a closed holder) and gets the payload.

"Gets the payload" means: if the run holds ``token`` (a hook it created, or
one held unbound), ``HookReceived`` goes to that hook; if nobody holds the
token the run takes it unbound (hook 0, as continue-as-new hands tokens on)
and the payload waits in its log for the hook the run creates with it; if
another run holds the token, nothing is written and the result names it.
"""

from __future__ import annotations

from typing import Literal

from worlds.types import CreateRunRequest, HookDelivery, HookReceived, RunStatus

__all__ = ["check_request", "received", "route"]


def check_request(request: CreateRunRequest) -> str:
    """The key of the pair the operation is keyed by; ``ValueError`` without a policy."""
    if request.policy is None:
        raise ValueError("start_or_resume_hook needs request.policy naming the unique key")
    return request.policy.key


def route(holder_status: RunStatus | None) -> Literal["deliver", "create"]:
    """Deliver to an open holder; create the run when there is none or it closed."""
    if holder_status is not None and not holder_status.is_closed:
        return "deliver"
    return "create"


def received(hook: int, delivery: HookDelivery) -> HookReceived:
    """The event a delivery appends to the run holding its token as ``hook`` (0: unbound)."""
    return HookReceived(
        hook=hook,
        payload=delivery.payload,
        resume_id=delivery.resume_id,
        token="" if hook else delivery.token,
    )
