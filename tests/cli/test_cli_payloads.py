"""``wf start`` checks its JSON arguments against the workflow's annotations (issue 33.5)."""

from __future__ import annotations

from pathlib import Path

import anyio

import worlds
from tests.cli.test_cli import wf, wf_here
from workflow import list_runs

TARGET = "tests.api.test_payload_types:typed_order"
GOOD = [
    '{"number": "i-1", "total": "1.00", "issued": "2026-01-01T00:00:00Z"}',
    '{"weight_grams": 10, "label": "p"}',
    '{"name": "c", "tier": 1}',
]


def runs_in(url: str) -> list[str]:
    async def read() -> list[str]:
        async with worlds.open(url) as world:
            return [run.id for run in await list_runs(world=world)]

    return anyio.run(read)


def test_wf_start_refuses_an_argument_that_does_not_validate(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    refused = wf(url, "start", TARGET, *GOOD, '"two"')
    assert refused.code != 0
    assert "argument 'copies' of workflow 'typed_order' does not validate as int" in refused.err
    bad_model = wf_here(url, "start", TARGET, '{"number": "i-1"}', *GOOD[1:], "2")
    assert bad_model.code != 0
    assert "argument 'invoice' of workflow 'typed_order'" in bad_model.err
    assert runs_in(url) == []
    started = wf_here(url, "start", TARGET, *GOOD, "2")
    assert started.code == 0, started.err
    assert runs_in(url) == [started.out.strip()]
