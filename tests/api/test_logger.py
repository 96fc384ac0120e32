"""``from workflow import logger``: silent during replay, records carry the run's context."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from workflow import Worker, get_step_metadata, logger, start, step, workflow
from worlds.protocol import World

pytestmark = pytest.mark.anyio


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def collected() -> Iterator[list[logging.LogRecord]]:
    handler = Collect()
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


@step(retry_delay=0)
def flaky(order_id: str) -> str:
    attempt = get_step_metadata().attempt
    logger.info("charging %s", order_id)
    if attempt == 1:
        raise RuntimeError("first attempt fails")
    return f"paid-{attempt}"


@step
async def ship(order_id: str) -> str:
    logger.info("shipping %s", order_id)
    return "shipped"


@workflow
async def logged(order_id: str) -> str:
    logger.info("start %s", order_id)
    paid = await flaky(order_id)
    logger.info("paid %s", paid)
    shipped = await ship(order_id)
    logger.warning("done %s", shipped)
    return shipped


async def test_each_line_is_logged_once_though_every_task_replays(
    world: World, collected: list[logging.LogRecord]
) -> None:
    # cache_size=0: no sticky cache, so each workflow task replays the log from the start
    async with Worker(world, [logged], cache_size=0):
        run = await start(logged, "o-1", world=world)
        assert await run.result(timeout=20) == "shipped"
    lines = [record.getMessage() for record in collected]
    assert lines == [
        "start o-1",
        "charging o-1",
        "charging o-1",
        "paid paid-2",
        "shipping o-1",
        "done shipped",
    ]
    for record in collected:
        assert record.run_id == run.id  # type: ignore[attr-defined]
        assert record.workflow == "logged"  # type: ignore[attr-defined]
    in_workflow = [r for r in collected if r.getMessage().startswith(("start", "paid", "done"))]
    assert all(r.step is None and r.attempt is None for r in in_workflow)  # type: ignore[attr-defined]
    in_steps = [(r.step, r.attempt) for r in collected if r not in in_workflow]  # type: ignore[attr-defined]
    assert in_steps == [("flaky", 1), ("flaky", 2), ("ship", 1)]
    assert collected[1].step_id == f"{run.id}.1"  # type: ignore[attr-defined]


def test_outside_a_run_the_context_fields_are_none(collected: list[logging.LogRecord]) -> None:
    logger.info("plain")
    logger.info("given", extra={"run_id": "mine"})
    assert [(r.run_id, r.workflow, r.step) for r in collected] == [  # type: ignore[attr-defined]
        (None, None, None),
        ("mine", None, None),
    ]
