"""One-round-trip commits and starts of the PostgreSQL world (private to ``worlds.postgres``).

Most commits (a workflow task's events and steps, a step's result, a timer) set
no claim, hook or run attribute and do not close the run. Those go to the
``commit_run`` function of the schema in one call: it locks the run, checks
the lease, appends the events, acks and enqueues, all as the commit flow
(``worlds._flows.commit``) would. ``commit_params`` says whether a request
qualifies and builds the call; ``commit_result`` turns the rows back into a
``CommitResult``. Starts likewise: ``start_run`` (a run leased or with its
first task) and ``create_run`` (a run whose pairs are all free) do what the
create flow would. These functions are the one place an algorithm of the flows
is written a second time (``worlds.postgres.functions`` has their text);
``tests/worlds/test_postgres_fast_path.py`` holds the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import msgspec
from asyncpg import Record

from worlds.postgres import codecs
from worlds.postgres.rows import new_token
from worlds.semantics import (
    apply_to_run,
    created_event,
    deadline_item,
    first_task_commit,
    index_value,
    lease_deadline,
    new_run,
    stale_result,
    work_item_id,
    workflow_item_id,
)
from worlds.types import (
    EPOCH,
    AttributeSet,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookCreated,
    RateTokenRequested,
    RunContinued,
    RunFailed,
    RunRecord,
    RunStatus,
    SlotReleased,
    SlotRequested,
    StepStarted,
    StreamClosed,
    StreamWritten,
    UpdateRejected,
    UpdateReplied,
    WorkItem,
)

__all__ = [
    "CommitRunArgs",
    "StartRun",
    "batch_params",
    "claiming_params",
    "claiming_result",
    "commit_params",
    "commit_result",
    "start_params",
    "start_result",
]

_TEMPLATE = RunRecord(id="", workflow="", status=RunStatus.PENDING, created_at=EPOCH)


class CommitRunArgs(NamedTuple):
    """The arguments of ``commit_run``, in its parameter order (``p_<field>``)."""

    run: str
    worker: str
    lease: str | None
    token: int | None
    ack: bool
    now: datetime
    kinds: list[str]
    data: list[bytes]
    status: str | None
    started: datetime | None
    closed: datetime | None
    result: bytes | None
    error: bytes | None
    ids: list[str]
    wkinds: list[str]
    names: list[str]
    numbers: list[int]
    attempts: list[int]
    payloads: list[bytes]
    available: list[datetime | None]
    lease_asked: list[bool]
    tokens: list[int]
    expires: datetime
    starts: list[bytes]
    channel: str | None
    run_channel: str | None
    expect: int | None
    at: datetime | None


def _qualifies(event: EventKind) -> bool:
    if isinstance(event, AttributeSet):
        return event.step is not None and not event.unique
    if isinstance(event, RunFailed) and event.handler is not None:
        return False  # the general path starts the failure handler's run
    # a close that must tell a parent, cancel children or free slots is sent back
    # by the function (outcome ``general``); a hold's slot is settled (and
    # released, promoting) by the general path, and so is a rate limit's token
    slot = (SlotRequested, SlotReleased, RateTokenRequested)
    answers = (UpdateReplied, UpdateRejected)  # the flow wakes the update's callers
    return not isinstance(
        event, (HookCreated, RunContinued, StreamWritten, StreamClosed, *slot, *answers)
    )


def _unstamped(event: EventKind) -> EventKind:
    if event.seq == 0 and event.at == EPOCH:
        return event
    return msgspec.structs.replace(event, seq=0, at=EPOCH)


def commit_params(
    request: CommitRequest, now: datetime, channel: str | None, run_channel: str | None
) -> CommitRunArgs | None:
    """The arguments of ``COMMIT_RUN`` for ``request``, or ``None`` if it needs the
    general path (claims, hooks, run attributes, closing the run). A conditional
    request's events are stamped ``request.at`` when it has one."""
    if not all(_qualifies(event) for event in request.events):
        return None
    if request.at is not None:
        now = request.at
    state = _TEMPLATE
    for event in request.events:
        state = apply_to_run(state, msgspec.structs.replace(event, at=now))
    lease = request.lease
    schedule = request.schedule
    tokens = [new_token() for _ in schedule]
    return CommitRunArgs(
        run=request.run_id,
        worker=request.worker_id,
        lease=None if lease is None else lease.id,
        token=None if lease is None else lease.token,
        ack=request.ack,
        now=now,
        kinds=[codecs.EVENT_TAGS[type(event)] for event in request.events],
        data=[codecs.encode(_unstamped(event)) for event in request.events],
        status=None if state.status is RunStatus.PENDING else state.status.value,
        started=state.started_at,
        closed=state.closed_at if state.status.is_closed else None,
        result=state.result,
        error=None if state.error is None else codecs.encode(state.error),
        ids=[work_item_id(request.run_id, new) for new in schedule],
        wkinds=[new.kind for new in schedule],
        names=[new.name for new in schedule],
        numbers=[new.number for new in schedule],
        attempts=[new.attempt for new in schedule],
        payloads=[new.payload for new in schedule],
        available=[new.available_at for new in schedule],  # None: due at the server's now
        lease_asked=[new.lease for new in schedule],
        tokens=tokens,
        expires=lease_deadline(now, request.lease_seconds),
        starts=[
            codecs.encode(StepStarted(step=new.number, attempt=new.attempt))
            if new.kind == "step"
            else b""
            for new in schedule
        ],
        channel=channel,
        run_channel=run_channel,
        expect=request.expect_seq,
        at=request.at,
    )


def commit_result(
    request: CommitRequest, rows: Sequence[Record], args: CommitRunArgs
) -> CommitResult | None:
    """The result of a ``COMMIT_RUN`` call; ``None`` when the general path must
    answer: the lease was lost (it names the holder), the run was closed and
    ``request.discard`` must be appended, or a conditional commit must be
    rechecked (an attribute event after its horizon)."""
    last = rows[-1]
    outcome, status, base, at = last["outcome"], last["status"], last["last_seq"], last["at"]
    if outcome == "missing":
        raise LookupError(f"unknown run {request.run_id}")
    if outcome == "closed":
        if request.discard is not None:
            return None
        return CommitResult(ok=False, status=RunStatus(status))
    if outcome == "lost":
        return None  # rare: the general path names the holder and records a discard
    if outcome == "general":
        return None  # slots, windowed claims, a parent or children: the general path
    if outcome == "stale":
        return stale_result(RunStatus(status))
    if outcome == "recheck":
        return None
    events = tuple(
        msgspec.structs.replace(event, seq=base + n, at=at)
        for n, event in enumerate(request.events, start=1)
    )
    leased = []
    for row in rows[:-1]:
        index = row["last_seq"] - 1  # a leased row's last_seq is the item's 1-based index
        new = request.schedule[index]
        leased.append(
            WorkItem(
                id=args.ids[index],
                run_id=request.run_id,
                kind=new.kind,
                name=row["name"],
                number=new.number,
                attempt=new.attempt,
                payload=new.payload,
                token=args.tokens[index],
                lease_expires_at=args.expires,
            )
        )
    return CommitResult(ok=True, status=RunStatus(status), events=events, leased=tuple(leased))


_PER_REQUEST = ("run", "worker", "lease", "token", "ack", "now")
_STATE = ("status", "started", "closed", "result", "error")
_ITEMS = (
    "ids",
    "wkinds",
    "names",
    "numbers",
    "attempts",
    "payloads",
    "available",
    "lease_asked",
    "tokens",
)


def batch_params(
    batch: Sequence[CommitRunArgs], channel: str | None, run_channel: str | None
) -> list[object]:
    """The arguments of ``COMMIT_RUNS`` for the ``commit_run`` calls ``batch``: one
    array per scalar argument, the events and items of all calls concatenated
    with a count per call."""

    def column(field: str) -> list[object]:
        return [getattr(args, field) for args in batch]

    def joined(field: str) -> list[object]:
        return [value for args in batch for value in getattr(args, field)]

    return [
        *(column(field) for field in _PER_REQUEST),
        [len(args.kinds) for args in batch],
        joined("kinds"),
        joined("data"),
        *(column(field) for field in _STATE),
        [len(args.ids) for args in batch],
        *(joined(field) for field in _ITEMS),
        column("expires"),
        joined("starts"),
        channel,
        run_channel,
        column("expect"),
        column("at"),
    ]


class StartRun(NamedTuple):
    """A call of ``START_RUN`` (``params``) and what reading its rows needs."""

    params: list[object]
    at: datetime
    token: int
    expires: datetime
    task: CommitRequest | None
    commit: CommitRunArgs | None


def start_params(
    request: CreateRunRequest, now: datetime, channel: str | None, run_channel: str | None
) -> StartRun | None:
    """The ``START_RUN`` call for ``request``, or ``None`` if it needs another path:
    no ``lease_to``, or pairs to claim or a deadline. The first task goes along
    when ``commit_run`` can apply it (else only the workflow item is leased)."""
    if request.lease_to is None or request.unique or request.timeout_at is not None:
        return None
    task = first_task_commit(request)
    commit = None if task is None else commit_params(task, now, channel, run_channel)
    if commit is None:
        task = None
    at = now if task is None or task.at is None else task.at
    attributes = dict(request.attributes)
    keys = list(attributes)
    token = new_token()
    expires = lease_deadline(at, request.lease_seconds) if commit is None else commit.expires
    created = created_event(request.workflow, request.args, attributes, at)
    head: list[object] = [
        request.run_id,
        request.workflow,
        at,
        codecs.encode(attributes),
        keys,
        [index_value(attributes[key]) for key in keys],
        codecs.encode(created),
        workflow_item_id(request.run_id),
        request.lease_to,
        token,
        commit is not None,
    ]
    if commit is None:
        tail: list[object] = [[], [], None, None, None, None, None, *([[]] * 9), expires, []]
    else:
        tail = [getattr(commit, field) for field in _TASK]
    return StartRun([*head, *tail, channel, run_channel], at, token, expires, task, commit)


_TASK = ("kinds", "data", *_STATE, *_ITEMS, "expires", "starts")


def start_result(
    request: CreateRunRequest, start: StartRun, rows: Sequence[Record]
) -> CreateRunResult:
    """The result of a ``START_RUN`` call made with ``start``."""
    run = new_run(request.run_id, request.workflow, dict(request.attributes), start.at)
    if start.task is None or start.commit is None:
        leased = WorkItem(
            id=workflow_item_id(request.run_id),
            run_id=request.run_id,
            kind="workflow",
            name=request.workflow,
            number=0,
            attempt=1,
            payload=b"",
            token=start.token,
            lease_expires_at=start.expires,
        )
        return CreateRunResult(run=run, leased=leased)
    first = commit_result(start.task, rows, start.commit)
    assert first is not None, "a new run's first task is neither closed, lost nor stale"
    return CreateRunResult(run=run, first=first)


def claiming_params(request: CreateRunRequest, now: datetime, channel: str | None) -> list[object]:
    """The arguments of ``CREATE_RUN_CLAIMING`` (the ``create_run`` function): the run
    of ``request`` with its unique pairs (claimed in key order) and its deadline timer."""
    attributes = dict(request.attributes)
    created = created_event(request.workflow, request.args, attributes, now)
    keys, claimed = list(attributes), sorted(request.unique)
    timer = deadline_item(request)
    return [
        request.run_id,
        request.workflow,
        now,
        codecs.encode(attributes),
        keys,
        [index_value(attributes[key]) for key in keys],
        codecs.encode(created),
        workflow_item_id(request.run_id),
        channel,
        claimed,
        [index_value(attributes[key]) for key in claimed],
        [codecs.encode(attributes[key]) for key in claimed],
        None if timer is None else work_item_id(request.run_id, timer),
        None if timer is None else timer.number,
        None if timer is None else timer.attempt,
        None if timer is None else timer.payload,
        None if timer is None else timer.available_at,
    ]


def claiming_result(request: CreateRunRequest, now: datetime) -> CreateRunResult:
    """The result of a ``CREATE_RUN_CLAIMING`` call made at ``now`` that succeeded."""
    return CreateRunResult(run=new_run(request.run_id, request.workflow, request.attributes, now))
