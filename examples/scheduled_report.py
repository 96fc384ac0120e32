"""A report built on a schedule, sharing its unique pair with starts by hand.

    python examples/scheduled_report.py          # create the schedules (once)
    wf worker examples.scheduled_report          # workers fire them
    wf schedules list

``daily-report`` runs at 03:00 Paris time; ``heartbeat`` every ten seconds. The
daily report claims ``report=daily``, so a webhook calling
``start_with_policy(build_report, "eu", key="report", value="daily")`` and the
schedule never build the report twice at once.
"""

from __future__ import annotations

from datetime import timedelta

import anyio

import worlds
from workflow import step, workflow
from workflow.schedules import Overlap, ScheduleExistsError, create_schedule


@step
async def gather(region: str) -> int:
    await anyio.sleep(0.01)  # stands for a query to the warehouse
    return len(region)


@workflow
async def build_report(region: str) -> str:
    rows = await gather(region)
    return f"report for {region}: {rows} rows"


@workflow
async def heartbeat() -> str:
    return "ok"


async def main() -> None:
    async with worlds.open(worlds.url_from_env()) as world:
        try:
            await create_schedule(
                build_report,
                "eu",
                id="daily-report",
                cron="0 3 * * *",
                timezone="Europe/Paris",
                overlap=Overlap.SKIP,
                catchup_window=timedelta(hours=1),
                attributes={"team": "data"},
                key="report",
                value="daily",
                world=world,
            )
            await create_schedule(
                heartbeat, id="heartbeat", every=timedelta(seconds=10), world=world
            )
            print("created schedules daily-report and heartbeat")
        except ScheduleExistsError as exc:
            print(exc)


if __name__ == "__main__":
    anyio.run(main)
