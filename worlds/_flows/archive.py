"""A world's full dump and load: ``World.export_rows`` and ``World.import_rows``, for every backend.

Exporting reads the world in one order: its settings, then its runs a page at
a time (each page's runs with their logs, then every row that names them, as
``worlds.archive.ROW_ORDER`` lists the kinds), then the rows no stored run
owns (tombstones, released pairs, schedules, key limits and their shares,
deployments). Leases and registered workers are left out. Importing writes one
batch in one transaction: the batch is checked (``worlds._rules.archive``),
refused whole if the world holds any of its runs, pairs, hook tokens,
schedules, key limits or deployed workflows, then written kind by kind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from worlds import archive
from worlds._flows.rows import DumpSource, LoadRows, Rows
from worlds._rules import archive as rules
from worlds._rules.terms import index_value

__all__ = ["PAGE", "export_rows", "import_rows"]

PAGE = 200
"""Runs read per page of an export."""


async def export_rows(
    source: DumpSource, run_ids: Sequence[str] | None = None
) -> AsyncIterator[archive.DumpRow]:
    """See ``World.export_rows``: every row of the world, or of the runs ``run_ids``."""
    if run_ids is not None:
        for start in range(0, len(run_ids), PAGE):
            for row in await source.dumped_run_rows(run_ids[start : start + PAGE]):
                yield row
        return
    for row in await source.dumped_settings():
        yield row
    after = ""
    while page := await source.dumped_run_ids(after, PAGE):
        for row in await source.dumped_run_rows(page):
            yield row
        after = page[-1]
    for row in await source.dumped_world_rows():
        yield row


async def import_rows(rows: Rows, load: LoadRows, batch: Sequence[archive.DumpRow]) -> None:
    """See ``World.import_rows``: write ``batch`` or, refusing it, nothing."""
    ordered = rules.check_batch(batch)

    settings = [r for r in ordered if isinstance(r, archive.DumpedSetting)]
    runs = [r for r in ordered if isinstance(r, archive.DumpedRun)]
    claims = [r for r in ordered if isinstance(r, archive.DumpedClaim)]
    released = [r for r in ordered if isinstance(r, archive.DumpedRelease)]
    hooks = [r for r in ordered if isinstance(r, archive.DumpedHook)]
    schedules = [r for r in ordered if isinstance(r, archive.DumpedSchedule)]
    present = await rows.existing_runs([r.record.id for r in runs])
    _refuse(rules.present_refusal("run", present))
    pairs = [(c.claim.key, index_value(c.claim.value)) for c in claims]
    pairs += [(r.key, r.ivalue) for r in released]
    taken = [
        f"{key}={term}" for key, term in pairs if await rows.get_claim((key, term)) is not None
    ]
    _refuse(rules.present_refusal("the claim of", taken))
    held = [h.hook.token for h in hooks if await rows.hook_holder(h.hook.token) is not None]
    _refuse(rules.present_refusal("hook token", held))
    existing = [
        s.schedule.id for s in schedules if await rows.get_schedule(s.schedule.id) is not None
    ]
    _refuse(rules.present_refusal("schedule", existing))
    limits = [r for r in ordered if isinstance(r, archive.DumpedKeyLimit)]
    shares = [r for r in ordered if isinstance(r, archive.DumpedKeyShare)]
    limited = [
        key
        for key in {r.limit.key for r in limits} | {r.key for r in shares}
        if await rows.key_row(key) is not None
    ]
    _refuse(rules.present_refusal("the key limit of", limited))
    deployed = [r for r in ordered if isinstance(r, archive.DumpedDeployment)]
    builds = {r.build_id: await load.stored_deployment(r.build_id) for r in deployed}
    present_builds = [
        f"{r.build_id}/{r.workflow}" for r in deployed if r.workflow in (builds[r.build_id] or {})
    ]
    _refuse(rules.present_refusal("the deployment", present_builds))
    fresh: list[archive.DumpedSetting] = []
    for setting in settings:
        stored = await load.stored_setting(setting.key)
        _refuse(rules.setting_refusal(setting.key, stored, setting.value))
        if stored is None:
            fresh.append(setting)
    await load.load_settings(fresh)
    await load.load_runs(runs)
    await load.load_claims(claims, released)
    await load.load_slots([r for r in ordered if isinstance(r, archive.DumpedSlot)])
    await load.load_tokens([r for r in ordered if isinstance(r, archive.DumpedToken)])
    await load.load_hooks(hooks, [r for r in ordered if isinstance(r, archive.DumpedResume)])
    await load.load_updates([r for r in ordered if isinstance(r, archive.DumpedUpdate)])
    await load.load_work([r for r in ordered if isinstance(r, archive.DumpedWork)])
    await load.load_chunks([r for r in ordered if isinstance(r, archive.DumpedChunk)])
    await load.load_schedules(schedules)
    await load.load_key_limits(limits, shares)
    await load.load_deployments(deployed)


def _refuse(error: str | None) -> None:
    if error is not None:
        raise ValueError(error)
