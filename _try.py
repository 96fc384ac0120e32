import asyncio, re, urllib.request
from tests.ui_server import UiServer
from tests.apps.uiapp import pipeline, checkout, approval
from workflow import start, list_hooks, Limited
from workflow.schedules import create_schedule
with UiServer("sqlite:////tmp/wf_try.db") as s:
    async def seed():
        await create_schedule(checkout, "c-s", 5, id="nightly", cron="0 3 * * *", world=s.world)
        r = await start(checkout, "c-1", 100, world=s.world)
        await r.result(timeout=60)
        for i in range(3):
            await start(approval, f"o-{i}", attributes={"tenant": Limited("acme", 2)}, world=s.world)
        await asyncio.sleep(1)
    s.call(seed())
    for path in ("/", "/fragments/chart?window=hour", "/fragments/chart?window=day&q=customer+%3D+1", "/flow?key=tenant", "/schedules"):
        resp = urllib.request.urlopen(s.base + path)
        html = resp.read().decode()
        print(path, resp.status, len(html), re.findall(r'id="(chart-\w+|flow-chart|schedules)"|data-total="\d+"|class="holders">\d+|class="waiters">\d+|data-schedule="[^"]+"', html)[:10])
    print(html[html.index('<tbody>'):html.index('</tbody>')][:1500])
