"""Payload codecs: transform what a world stores (encryption at rest, compression).

::

    from worlds.codec import CodecWorld
    world = CodecWorld(worlds.open("sqlite:///app.db"), FernetCodec(key))
    async with world, Worker(world, [checkout]):
        run = await start(checkout, "o-1", world=world)

A ``CodecWorld`` wraps any world: every payload passes through the codec on its
way in and back out, so the engine, the client and the worker see plain values
while the storage holds only the codec's output. Give every process that uses
the world (workers, clients, the CLI) the same codec. Transformed: run and step
arguments, results, hook payloads, stream chunks, and the message and traceback
of recorded errors (``worlds._payloads`` knows where each record has them). In
clear, by design: attributes and claims (indexed and searched: never put
secrets in them), hook tokens, names, error types, cancel reasons, times,
statuses and schedules (the runs a fire creates are encoded). Bytes the codec
wrote start with ``0xC1``, which MessagePack never uses, so rows written before
a codec was configured stay readable as they are.

A world remembers its codec: the first payload a ``CodecWorld`` writes records
the codec's identity (``codec_id``) as the world's ``codec`` setting, checked
once per opened ``CodecWorld``. A ``CodecWorld`` with another codec is then
refused, and so is a client writing payloads without a codec
(``check_plain_write``): ``CodecRequiredError`` names the codec needed and
nothing is written.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

from worlds._payloads import MARKER, TEXT_PREFIX, PayloadCodec, Payloads
from worlds.errors import CodecRequiredError
from worlds.protocol import Isolation, OpenTransaction, World
from worlds.query import RunPage, RunQuery
from worlds.types import (
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookDelivery,
    HookStartResult,
    RunRecord,
    ScheduleFire,
    ScheduleRecord,
    StreamChunk,
    UpdateDelivery,
    UpdateOutcome,
    UpdateStartResult,
    WorkItem,
)
from worlds.wrapper import WorldWrapper

# pinned (tests/api/test_public_api.py); the codec's identity and the checks below
# are importable by name for the client, the engine and the CLI
__all__ = ["MARKER", "TEXT_PREFIX", "CodecWorld", "PayloadCodec"]

CODEC_SETTING = "codec"
"""The world setting (``World.setting``) holding the ``codec_id`` of the world's codec."""

_HOW = "open the world through worlds.codec.CodecWorld with it (wf: --codec MODULE:NAME)"


def codec_id(codec: PayloadCodec) -> str:
    """The identity a world records for ``codec``: the string ``codec.codec_id`` if
    the codec declares one, else ``module:QualifiedClassName`` of its class.

    Declare ``codec_id`` (``"fernet-v1"``, say) to keep the identity stable when
    the class moves or is renamed.
    """
    declared = getattr(codec, "codec_id", None)
    if isinstance(declared, str) and declared:
        return declared
    kind = type(codec)
    return f"{kind.__module__}:{kind.__qualname__}"


def _refusal(recorded: str) -> CodecRequiredError:
    return CodecRequiredError(
        f"this world's payloads are encoded with the codec {recorded!r}: {_HOW};"
        " nothing was written",
        recorded,
    )


_plain_ok: weakref.WeakSet[object] = weakref.WeakSet()
"""The worlds ``check_plain_write`` found without a recorded codec (asked once each)."""


def _encodes(world: World) -> bool:
    layer: object = world
    while isinstance(layer, WorldWrapper):
        if isinstance(layer, CodecWorld):
            return True
        layer = layer.inner
    return False


async def check_plain_write(world: World) -> None:
    """Refuse to write payloads through ``world`` in clear when its storage records a
    codec (``CODEC_SETTING``); a ``CodecWorld`` (or a wrapper of one) passes.

    Asked once per world object: a world found without a codec is not asked
    again, so a codec first recorded later by another process is noticed when
    the world is opened anew.

    Raises:
        CodecRequiredError: the world records a codec; it names it.
    """
    # a world that takes no weak reference is asked every time
    with contextlib.suppress(TypeError):
        if world in _plain_ok:
            return
    if _encodes(world):
        return
    recorded = await world.setting(CODEC_SETTING)
    if recorded is not None:
        raise _refusal(recorded)
    with contextlib.suppress(TypeError):
        _plain_ok.add(world)


async def codec_required(world: World) -> CodecRequiredError:
    """The error for a payload a codec wrote, read through ``world`` without one
    (naming the world's recorded codec, if it has one)."""
    recorded = await world.setting(CODEC_SETTING)
    named = "a payload codec" if recorded is None else f"the codec {recorded!r}"
    return CodecRequiredError(
        f"this payload was written through {named} and cannot be read without it: {_HOW}",
        recorded,
    )


def _decoding_record(name: str) -> Any:
    """A ``CodecWorld`` method forwarding ``name`` and decoding the run record it returns
    (its result and error); these methods take no payload in."""

    async def forward(self: CodecWorld, *args: Any, **kwargs: Any) -> RunRecord | None:
        return self._payloads.record_out(await getattr(self.inner, name)(*args, **kwargs))

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"See ``World.{name}``; the record's result and error are decoded."
    return forward


class CodecWorld(WorldWrapper):
    """A world storing in ``inner`` (any world) every payload through ``codec`` (a
    ``PayloadCodec``: ``encode``/``decode`` of bytes)."""

    CLEAR = frozenset(
        "protocol_version url gathers_writes __aenter__ __aexit__ close migrate info "  # noqa: SIM905
        "setting put_setting renew_leases release now wait wait_idle list_hooks prune_runs "
        "prune_expired prune_listed cancel_listed reopen_listed release_claim find_claim "
        "run_claims list_slots run_slots list_key_slots count_runs slot_history prune_slot_history "
        "create_schedule get_schedule "
        "list_schedules "
        "update_schedule delete_schedule lease_schedules register_worker heartbeat "
        "unregister_worker list_workers stream_closed set_key_limit get_key_limit export_rows "
        "import_rows list_deployments".split()
    )
    """What carries no payload, forwarded as it is; the rest is overridden below.
    ``export_rows``/``import_rows`` carry payloads as stored, encoded: a dump keeps
    the codec's bytes (and the codec setting), so it never needs the key."""

    def __init__(self, inner: World, codec: PayloadCodec) -> None:
        super().__init__(inner)
        self._payloads = Payloads(codec)
        self.codec_id = codec_id(codec)
        """What the world records as its codec (``codec_id``)."""
        self._recorded = False

    async def _writing(self) -> Payloads:
        """Before the first write: record this codec as the world's, or refuse
        another's. The payload codec, for the write to encode with."""
        if not self._recorded:
            recorded = await self.inner.setting(CODEC_SETTING, self.codec_id)
            if recorded != self.codec_id:
                assert recorded is not None  # a setting given a value is never None
                raise CodecRequiredError(
                    f"this world's payloads are encoded with the codec {recorded!r}, not "
                    f"{self.codec_id!r}: open it with that codec; nothing was written",
                    recorded,
                )
            self._recorded = True
        return self._payloads

    # Writes: payloads in are encoded, what comes back is decoded.

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """See ``World.create_run``; the arguments (and a first task's payloads) are encoded."""
        p = await self._writing()
        return p.created_out(await self.inner.create_run(p.create_in(request)))

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``; payloads in events and scheduled work are encoded."""
        p = await self._writing()
        return p.commit_out(await self.inner.commit(p.commit_in(request)))

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        """See ``World.commit_many``; each request as ``commit`` encodes it."""
        p = await self._writing()
        return p.outcomes_out(await self.inner.commit_many([p.commit_in(r) for r in requests]))

    @contextlib.asynccontextmanager
    async def transaction(
        self, lease: WorkItem, worker_id: str, isolation: Isolation = "repeatable_read"
    ) -> AsyncIterator[OpenTransaction]:
        """See ``World.transaction``; the step's outcome is encoded as ``commit``
        encodes it (the statements run as they are)."""
        p = await self._writing()
        async with self.inner.transaction(lease, worker_id, isolation) as inner:
            yield _EncodingTransaction(inner, p)

    async def fire_schedules(
        self, fires: Sequence[ScheduleFire]
    ) -> list[ScheduleRecord | Exception | None]:
        """See ``World.fire_schedules``; every start's arguments are encoded."""
        p = await self._writing()
        return await self.inner.fire_schedules(p.fires_in(fires))

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        """See ``World.start_or_resume_hook``; the arguments and the payload are encoded."""
        p = await self._writing()
        started = await self.inner.start_or_resume_hook(
            p.create_in(request), p.delivery_in(delivery)
        )
        return p.hook_started_out(started)

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``; the payload is encoded."""
        p = await self._writing()
        return await self.inner.resume_hook(token, p.in_(payload), resume_id)

    async def send_update(self, run_id: str, delivery: UpdateDelivery) -> UpdateOutcome:
        """See ``World.send_update``; the payload is encoded, a known reply decoded."""
        p = await self._writing()
        return p.outcome_out(await self.inner.send_update(run_id, p.update_in(delivery)))

    async def update_with_start(
        self, request: CreateRunRequest, delivery: UpdateDelivery
    ) -> UpdateStartResult:
        """See ``World.update_with_start``; the arguments and the payload are encoded."""
        p = await self._writing()
        started = await self.inner.update_with_start(p.create_in(request), p.update_in(delivery))
        return p.update_started_out(started)

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """See ``World.append_stream``; each chunk is encoded."""
        p = await self._writing()
        return await self.inner.append_stream(run_id, name, [p.in_(chunk) for chunk in chunks])

    # Reads: what comes back is decoded.

    get_run = _decoding_record("get_run")
    cancel_run = _decoding_record("cancel_run")  # the reason stays in clear
    request_cancel = _decoding_record("request_cancel")
    reopen_run = _decoding_record("reopen_run")
    fork_run = _decoding_record("fork_run")
    move_start = _decoding_record("move_start")
    pin_run = _decoding_record("pin_run")

    async def update_outcome(self, run_id: str, update_id: str) -> UpdateOutcome | None:
        """See ``World.update_outcome``; the reply is decoded."""
        outcome = await self.inner.update_outcome(run_id, update_id)
        return None if outcome is None else self._payloads.outcome_out(outcome)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """See ``World.read_events``; payloads are decoded."""
        return self._payloads.events_out(await self.inner.read_events(run_id, after_seq))

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``; results and errors are decoded."""
        return self._payloads.page_out(await self.inner.list_runs(query))

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        """See ``World.read_stream``; each chunk is decoded."""
        return self._payloads.chunks_out(await self.inner.read_stream(run_id, name, start, limit))

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``; payloads are decoded."""
        items = await self.inner.lease(
            worker_id, names=names, limit=limit, lease_seconds=lease_seconds
        )
        return [self._payloads.item_out(item) for item in items]


class _EncodingTransaction:
    """An open transaction whose commit passes through a codec."""

    def __init__(self, inner: OpenTransaction, payloads: Payloads) -> None:
        self._inner = inner
        self._payloads = payloads

    @property
    def raw(self) -> Any:
        return self._inner.raw

    @property
    def conflicted(self) -> bool:
        return self._inner.conflicted

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return await self._inner.execute(sql, *params)

    async def commit(self, request: CommitRequest) -> CommitResult:
        committed = await self._inner.commit(self._payloads.commit_in(request))
        return self._payloads.commit_out(committed)
