"""The memory world's side of a full dump and load: its ``DumpSource`` and ``LoadRows``.

Reads walk the stores; loads write through them (and so through the world's
journal, undone if the import fails).
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

from worlds import archive
from worlds._flows.deployments import Deployed
from worlds._flows.rows import Token
from worlds.memory.rows import MemoryRows, Tables
from worlds.memory.work import QueuedItem
from worlds.protocol import SCHEDULE_TOPIC, WORK_TOPIC
from worlds.semantics import index_value
from worlds.types import Pin, StreamChunk

__all__ = ["MemoryLoad", "MemorySource"]


class MemorySource:
    """Reads the dump of a memory world from its stores."""

    def __init__(self, tables: Tables, settings: MutableMapping[str, str]) -> None:
        self._t = tables
        self._settings = settings

    async def dumped_settings(self) -> list[archive.DumpRow]:
        return [archive.DumpedSetting(k, v) for k, v in sorted(self._settings.items())]

    async def dumped_run_ids(self, after: str, limit: int) -> list[str]:
        return sorted(run_id for run_id in self._t.runs.runs if run_id > after)[:limit]

    async def dumped_run_rows(self, run_ids: Sequence[str]) -> list[archive.DumpRow]:
        t, wanted = self._t, set(run_ids)
        out: list[archive.DumpRow] = []
        for run_id in sorted(wanted):
            stored = t.runs.runs.get(run_id)
            if stored is not None:
                out.append(archive.DumpedRun(stored.record, list(stored.events)))
        present = {row.record.id for row in out if isinstance(row, archive.DumpedRun)}
        claims, _ = t.claims.dump()
        out += [
            archive.DumpedClaim(c)
            for c in sorted(claims, key=lambda c: (c.key, index_value(c.value)))
            if c.run_id in present and c.pruned_status is None
        ]
        slots = sorted(t.slots.dump(), key=lambda ps: (ps[0], ps[1].position))
        out += [archive.DumpedSlot(slot) for _, slot in slots if slot.run_id in present]
        tokens = sorted(t.rates.dump(), key=lambda r: (r[0], r[2].at, r[2].run_id, r[1]))
        out += [
            archive.DumpedToken(
                pair[0], pair[1], tok.at, tok.run_id, number, tok.limit, tok.per, prio
            )
            for pair, number, tok, prio in tokens
            if tok.run_id in present
        ]
        hooks = sorted(t.hooks.tokens.values(), key=lambda h: h.token)
        out += [archive.DumpedHook(h) for h in hooks if h.run_id in present]
        resumes = sorted(t.hooks.resumed.items())
        out += [
            archive.DumpedResume(tok, rid, run) for (tok, rid), run in resumes if run in present
        ]
        out += [
            archive.DumpedUpdate(run, update_id, seq)
            for (run, update_id), seq in sorted(t.updates.items())
            if run in present
        ]
        items = sorted(t.work.items.values(), key=lambda i: (i.run_id, i.id))
        out += [
            archive.DumpedWork(
                run_id=i.run_id,
                id=i.id,
                kind=i.kind,
                name=i.name,
                number=i.number,
                attempt=i.attempt,
                payload=i.payload,
                available_at=i.available_at,
                rewake=i.rewake,
                ever_leased=i.ever_leased,
            )
            for i in items
            if i.run_id in present
        ]
        chunks = sorted(t.streams.dump(), key=lambda r: (r[0], r[1], r[2].offset))
        out += [
            archive.DumpedChunk(run, name, c.offset, c.data, c.at)
            for run, name, c in chunks
            if run in present
        ]
        return out

    async def dumped_world_rows(self) -> list[archive.DumpRow]:
        claims, released = self._t.claims.dump()
        out: list[archive.DumpRow] = [
            archive.DumpedClaim(c)
            for c in sorted(claims, key=lambda c: (c.key, index_value(c.value)))
            if c.pruned_status is not None
        ]
        out += [
            archive.DumpedRelease(pair[0], pair[1], generation)
            for pair, generation in sorted(released)
        ]
        schedules = self._t.schedules
        after: str | None = None
        while page := schedules.list(after=after, limit=500):
            out += [archive.DumpedSchedule(record) for record in page]
            after = page[-1].id
        limits, shares = self._t.key_limits.dump()
        out += [archive.DumpedKeyLimit(limit, vtime) for limit, vtime in limits]
        out += [
            archive.DumpedKeyShare(key, ivalue, share, queued)
            for key, ivalue, share, queued in shares
        ]
        out += [
            archive.DumpedDeployment(build.build_id, workflow, pin, build.registered_at)
            for _, build in sorted(self._t.deployments.items())
            for workflow, pin in sorted(build.workflows.items())
        ]
        return out


class MemoryLoad:
    """Writes dumped rows into the stores inside one memory world operation."""

    def __init__(
        self, rows: MemoryRows, tables: Tables, settings: MutableMapping[str, str]
    ) -> None:
        self._rows = rows
        self._t = tables
        self._settings = settings

    async def stored_setting(self, key: str) -> str | None:
        return self._settings.get(key)

    async def stored_deployment(self, build_id: str) -> dict[str, Pin] | None:
        return await self._rows.deployment(build_id)

    async def load_settings(self, rows: Sequence[archive.DumpedSetting]) -> None:
        for row in rows:
            self._settings.setdefault(row.key, row.value)

    async def load_runs(self, rows: Sequence[archive.DumpedRun]) -> None:
        for row in rows:
            self._t.runs.load(row.record, row.events)

    async def load_claims(
        self, claims: Sequence[archive.DumpedClaim], released: Sequence[archive.DumpedRelease]
    ) -> None:
        for claim in claims:
            self._t.claims.load(claim.claim)
        for release in released:
            self._t.claims.load_released((release.key, release.ivalue), release.generation)

    async def load_slots(self, rows: Sequence[archive.DumpedSlot]) -> None:
        for row in rows:
            self._t.slots.load((row.slot.key, index_value(row.slot.value)), row.slot)

    async def load_tokens(self, rows: Sequence[archive.DumpedToken]) -> None:
        for r in rows:
            token = Token(r.at, r.run_id, r.limit, r.per)
            self._t.rates.insert((r.key, r.ivalue), r.run_id, r.number, token, r.priority)

    async def load_hooks(
        self, hooks: Sequence[archive.DumpedHook], resumes: Sequence[archive.DumpedResume]
    ) -> None:
        for hook in hooks:
            self._t.hooks.load(hook.hook)
        for resume in resumes:
            self._t.hooks.load_resume(resume.token, resume.resume_id, resume.run_id)

    async def load_updates(self, rows: Sequence[archive.DumpedUpdate]) -> None:
        for u in rows:
            self._t.journal.put(self._t.updates, (u.run_id, u.update_id), u.seq)

    async def load_work(self, rows: Sequence[archive.DumpedWork]) -> None:
        for w in rows:
            self._t.work.load(
                QueuedItem(
                    id=w.id,
                    run_id=w.run_id,
                    kind=w.kind,
                    name=w.name,
                    number=w.number,
                    attempt=w.attempt,
                    payload=w.payload,
                    available_at=w.available_at,
                    rewake=w.rewake,
                    ever_leased=w.ever_leased,
                )
            )
        if rows:
            self._rows.signals.add(WORK_TOPIC)

    async def load_chunks(self, rows: Sequence[archive.DumpedChunk]) -> None:
        for c in rows:
            self._t.streams.load(c.run_id, c.name, StreamChunk(offset=c.seq, data=c.data, at=c.at))

    async def load_schedules(self, rows: Sequence[archive.DumpedSchedule]) -> None:
        for row in rows:
            self._t.schedules.insert(row.schedule)
        if rows:
            self._rows.signals.add(SCHEDULE_TOPIC)

    async def load_key_limits(
        self, limits: Sequence[archive.DumpedKeyLimit], shares: Sequence[archive.DumpedKeyShare]
    ) -> None:
        for k in limits:
            self._t.key_limits.load(k.limit, k.vtime)
        for share in shares:
            self._t.key_limits.load_share(share.key, share.ivalue, share.share, share.queued)

    async def load_deployments(self, rows: Sequence[archive.DumpedDeployment]) -> None:
        for d in rows:
            found = self._t.deployments.get(d.build_id)
            workflows = {} if found is None else dict(found.workflows)
            workflows[d.workflow] = d.pin
            # a build's first registration is the earliest of its rows (as SQL's min)
            since = d.registered_at if found is None else min(found.registered_at, d.registered_at)
            self._t.journal.put(
                self._t.deployments, d.build_id, Deployed(d.build_id, workflows, since)
            )
