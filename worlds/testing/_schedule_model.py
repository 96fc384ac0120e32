"""A hypothesis state machine for schedule storage, checked against a tiny model.

Rules create, update (at the current or a stale version), pause, delete and
lease schedules; after every step the world's schedules (ids, versions,
paused, notes) must agree with the model, and a lease must hand out exactly
the due, unpaused, unleased ones. Like ``ModelConformance``, the machine runs
in a worker thread and reaches the world on the test's event loop.
"""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta

import anyio.from_thread
import anyio.to_thread
import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from worlds.protocol import World
from worlds.testing._base import ConformanceBase
from worlds.types import ScheduleRecord, utcnow

__all__ = ["ScheduleModelConformance"]

_IDS = 4
_SETTINGS = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


def _machine(world: World) -> type[RuleBasedStateMachine]:
    class ScheduleModel(RuleBasedStateMachine):
        """Schedules as the world should have them: version, paused, note, due, leased."""

        def __init__(self) -> None:
            super().__init__()
            self.prefix = uuid.uuid4().hex[:10]
            self.workflow = f"sched-model-{self.prefix}"
            self.model: dict[str, tuple[int, bool, str | None, bool]] = {}
            self.leased: set[str] = set()

        def name(self, index: int) -> str:
            return f"{self.prefix}-{index}"

        def stored(self, schedule_id: str) -> ScheduleRecord:
            record = anyio.from_thread.run(world.get_schedule, schedule_id)
            assert record is not None, f"schedule {schedule_id} is missing"
            return record

        @rule(index=st.integers(0, _IDS - 1), paused=st.booleans(), due=st.booleans())
        def create(self, index: int, paused: bool, due: bool) -> None:
            schedule_id = self.name(index)
            wake = utcnow() + (timedelta(seconds=-1) if due else timedelta(hours=1))
            record = ScheduleRecord(
                id=schedule_id,
                workflow=self.workflow,
                spec=index.to_bytes(1, "big"),
                paused=paused,
                next_fire_at=wake,
                wake_at=wake,
            )
            if schedule_id in self.model:
                try:
                    anyio.from_thread.run(world.create_schedule, record)
                except ValueError:
                    return
                raise AssertionError(f"a second create of {schedule_id} was accepted")
            stored = anyio.from_thread.run(world.create_schedule, record)
            assert stored.version == 1
            self.model[schedule_id] = (1, paused, None, due)

        @rule(
            index=st.integers(0, _IDS - 1),
            stale=st.booleans(),
            paused=st.booleans(),
            note=st.sampled_from([None, "n", "migration"]),
        )
        def update(self, index: int, stale: bool, paused: bool, note: str | None) -> None:
            schedule_id = self.name(index)
            if schedule_id not in self.model:
                return
            version, _, _, due = self.model[schedule_id]
            read = self.stored(schedule_id)
            asked = version - 1 if stale else version
            new = msgspec.structs.replace(read, version=asked, paused=paused, note=note)
            result = anyio.from_thread.run(world.update_schedule, new)
            if stale:
                assert result is None, "an update at a stale version was written"
                return
            assert result is not None and result.version == version + 1
            self.model[schedule_id] = (version + 1, paused, note, due)
            self.leased.discard(schedule_id)

        @rule(index=st.integers(0, _IDS - 1))
        def delete(self, index: int) -> None:
            schedule_id = self.name(index)
            deleted = anyio.from_thread.run(world.delete_schedule, schedule_id)
            assert deleted == (schedule_id in self.model)
            self.model.pop(schedule_id, None)
            self.leased.discard(schedule_id)

        @rule()
        def lease(self) -> None:
            got = anyio.from_thread.run(
                functools.partial(
                    world.lease_schedules, "w", names=[self.workflow], limit=100, lease_seconds=60
                )
            )
            expected = {
                schedule_id
                for schedule_id, (_, paused, _, due) in self.model.items()
                if due and not paused and schedule_id not in self.leased
            }
            assert {record.id for record in got.schedules} == expected
            self.leased |= expected

        @invariant()
        def agrees(self) -> None:
            listed = anyio.from_thread.run(
                functools.partial(world.list_schedules, after=self.prefix, limit=100)
            )
            mine = {r.id: r for r in listed if r.id.startswith(self.prefix)}
            assert sorted(mine) == sorted(self.model)
            for schedule_id, (version, paused, note, _) in self.model.items():
                record = mine[schedule_id]
                assert (record.version, record.paused, record.note) == (version, paused, note)
                assert record.workflow == self.workflow

    return ScheduleModel


class ScheduleModelConformance(ConformanceBase):
    """Schedule storage follows the model under any sequence of operations."""

    @pytest.mark.anyio
    async def test_schedules_follow_the_model(self, world: World) -> None:
        machine = _machine(world)
        await anyio.to_thread.run_sync(
            functools.partial(run_state_machine_as_test, machine, settings=_SETTINGS)
        )
