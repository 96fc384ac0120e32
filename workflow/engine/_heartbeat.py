"""The worker's heartbeat: its registration in the world and the beat that keeps it live.

A registered worker's leases follow its liveness, not their timers (RFC 0001,
"Worker liveness"): its items are taken over only once the world declares it
dead, which takes other workers seen beating for a whole window after its last
beat. So the worker registers before it leases anything, beats every quarter
of its window in one world call whatever it holds, and says goodbye when it
stops. A heartbeat answered False means the world declared this worker dead
and revoked its leases (a long pause, a partition): it is fenced, and the
worker stops at once, committing and releasing nothing more.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Callable

import anyio
import msgspec

from workflow.engine._faults import Complaints, is_fatal, riding_out
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import World
from worlds.types import Pin, WorkerInfo

__all__ = ["BEATS_PER_WINDOW", "Heartbeat"]

log = logging.getLogger("workflow.worker")

BEATS_PER_WINDOW = 4
"""Heartbeats per liveness window: the world's rule needs one every half window,
and this leaves room for a late one."""


class Heartbeat:
    """Registers a worker in its world, beats for it, and notices when it is fenced.

    Args:
        world: the worker's world.
        worker_id: the worker's id.
        liveness_seconds: its window: the world declares it dead once it has not
            beaten for this long while other workers were seen beating.
        build_id: the build the worker runs, shown by ``wf workers list``.
        workflows: the workflows it serves and their pins, read when it registers:
            with a build id the world records them for the build (RFC 0025).
        complaints: the worker's outage reports (one per worker, whichever loop
            sees it).
        fail: stops the worker when the world cannot be used.
        fenced: stops the worker when the world declared it dead.
    """

    def __init__(
        self,
        world: World,
        worker_id: str,
        *,
        liveness_seconds: float,
        build_id: str | None,
        workflows: Callable[[], dict[str, Pin]],
        complaints: Complaints,
        fail: Callable[[WorldMisconfiguredError], None],
        fenced: Callable[[], None],
    ) -> None:
        self.world = world
        self.info = WorkerInfo(
            id=worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            build_id=build_id,
            liveness_seconds=liveness_seconds,
        )
        self.interval = liveness_seconds / BEATS_PER_WINDOW
        self._workflows = workflows
        self._complaints = complaints
        self._fail = fail
        self._fenced = fenced
        self.registered = False
        """Whether the world has this worker's registration (and it is not fenced)."""

    async def register(self) -> None:
        """Register, waiting out a world that is down as the worker's loops do. A
        world without registrations (one written before them) leaves the worker's
        leases to their timers."""
        if not callable(getattr(self.world, "register_worker", None)):
            log.info("worker %s: this world keeps no registrations", self.info.id)
            return
        if self.info.build_id is not None:  # a build's workflows, checked by the world
            self.info = msgspec.structs.replace(self.info, workflows=self._workflows())
        register = functools.partial(self.world.register_worker, self.info)
        await riding_out(register, "register with the world", self._complaints, self.interval)
        self.registered = True

    async def run(self, in_flight: Callable[[], int]) -> None:
        """Beat every ``interval`` seconds, reporting ``in_flight()``, until fenced."""
        doing = "heartbeat"
        while self.registered:
            await anyio.sleep(self.interval)
            try:
                with anyio.fail_after(max(self.interval, 1.0)):
                    alive = await self.world.heartbeat(self.info.id, in_flight())
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                    return
                # a world that is down answers nobody's heartbeat: when it is back
                # it declares nobody dead for a window, in which this beats again
                self._complaints.failed(doing, exc, self.interval)
                continue
            self._complaints.succeeded(doing)
            if not alive and not self.registered:
                # it said goodbye while this beat was on its way (``unregister``):
                # a stopped worker's beat is answered False, which is no fencing
                return
            if not alive:
                self.registered = False
                log.error(
                    "worker %s was declared dead by its world (no heartbeat for %.1f s "
                    "while other workers beat) and is fenced: its leases are gone, it stops",
                    self.info.id,
                    self.info.liveness_seconds,
                )
                self._fenced()
                return

    async def unregister(self) -> None:
        """Say goodbye (best effort): the worker's record shows it stopped."""
        if not self.registered:
            return
        self.registered = False
        try:
            with anyio.move_on_after(5):
                await self.world.unregister_worker(self.info.id)
        except Exception as exc:
            if is_fatal(exc) is None:  # an unusable world was reported when it stopped
                self._complaints.failed("unregister from the world", exc, None)
