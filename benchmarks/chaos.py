"""The chaos suite: workers and servers fail while runs are in flight; check what held.

Runs ``wf worker`` processes over a world (SQLite, and PostgreSQL on a server
this script starts itself with fsync on), starts workflows of
``benchmarks/chaos_app.py``, injects one fault per scenario, waits for the
runs to drain and checks the invariants from the runs' event logs and the
journal the step bodies write:

======================  ===================================================
scenario                fault
======================  ===================================================
kill_storm              SIGKILL a random worker every second, start another
restart_fast            ``pg_ctl restart -m fast`` mid-run (PostgreSQL)
restart_immediate       ``pg_ctl restart -m immediate`` (a crash; PostgreSQL)
flap                    12 immediate restarts 1 s apart (PostgreSQL)
freeze                  every server process SIGSTOPped 12 s (PostgreSQL)
failover                the primary crashes (``pg_ctl stop -m immediate``)
                        while runs start, steps commit and unique pairs are
                        claimed; 1 s later its synchronous standby is
                        promoted (PostgreSQL, a multi-host URL)
failover_async          the same with asynchronous replication: what an
                        acknowledged commit may lose is measured, not asserted
starve                  7 CPU-burning processes on the 2 cores for 12 s
zombie                  a worker SIGSTOPped past its lease, then SIGCONT
contention              processes race to start runs claiming the same pairs
======================  ===================================================

Columns: ``runs`` completed/started (a run not completed when the drain
timeout passes is stuck), ``bad`` runs completed with a wrong result,
``never_run`` steps with a recorded result whose body never finished,
``dup_results`` steps with more than one ``StepCompleted``, ``reexec``
executions of a step that started after a body of the same step had
finished (the waste faults cause), ``dup_holders`` unique pairs held by more
than one run, ``drain_s`` seconds from the end of the fault to the last run
closed, ``log_lines`` the most stderr lines one worker wrote, ``reported_s``
(freeze) seconds from freezing the server to a worker's first log line (none:
no worker said anything during the freeze), ``starts_lost`` acknowledged starts
(a run id returned to the caller) whose run is gone, ``results_lost`` recorded
step results that were lost (a later step of the run started before the time
of the step's result in the final log, which only happens if an earlier result
of it was committed and then lost), ``exited``
workers that stopped by themselves (they must ride every fault out). The first
five, ``dup_holders``, ``starts_lost``, ``results_lost`` and ``exited`` are
correctness invariants (they must be 0 and all runs completed; for
``failover_async`` the losses are reported, not asserted); ``reexec``,
``drain_s`` and ``log_lines`` measure manners.

Usage::

    python benchmarks/chaos.py [--quick | --tiny] [--worlds sqlite,postgres]
        [--scenarios kill_storm,zombie,...] [--json results.json] [--keep]

Exits 1 if an invariant is violated. ``--quick`` runs a small scale (the test
suite runs it with ``WORKFLOW_TEST_FULL=1``), ``--tiny`` a smaller one (the
suite's default); the default scale takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import worlds  # noqa: E402
from benchmarks.chaos_app import chain, holder  # noqa: E402
from tests import pg_server  # noqa: E402
from workflow import AttributeConflictError, Unique, get_run, start  # noqa: E402
from worlds.errors import WorldError  # noqa: E402
from worlds.protocol import World  # noqa: E402
from worlds.types import RunStatus, StepCompleted  # noqa: E402

FAILOVER_SCENARIOS = ("failover", "failover_async")
SERVER_SCENARIOS = ("restart_fast", "restart_immediate", "flap", "freeze", *FAILOVER_SCENARIOS)
SCENARIOS = ("kill_storm", *SERVER_SCENARIOS, "starve", "zombie", "contention")
LOSSES = ("starts_lost", "results_lost", "dup_holders")
"""What asynchronous replication may lose: measured for ``failover_async``, not asserted."""
LEASE_SECONDS = 2.0
DRAIN_TIMEOUT = 120.0
BURNERS = 7
"""CPU-burning processes of ``starve``."""
CLOCK_SLACK = 0.05
"""Seconds by which the world's event times (the server's clock, as each worker
estimates it) may lead this host's clock in the journal."""
PROMOTE_AFTER = 1.0
"""Seconds from the primary's crash to the standby's promotion (a failover manager's
detection time, shortened)."""


@dataclass(frozen=True)
class Scale:
    """How big a scenario is."""

    runs: int
    step_seconds: float
    workers: int
    kills: int
    restarts: int
    freeze_seconds: float
    contenders: int
    values: int


FULL = Scale(runs=150, step_seconds=1.0, workers=3, kills=8, restarts=12, freeze_seconds=12.0,
             contenders=4, values=20)  # fmt: skip
QUICK = Scale(runs=16, step_seconds=0.5, workers=2, kills=3, restarts=3, freeze_seconds=8.0,
              contenders=3, values=5)  # fmt: skip
TINY = Scale(runs=8, step_seconds=0.3, workers=2, kills=2, restarts=2, freeze_seconds=4.0,
             contenders=2, values=3)  # fmt: skip


def fault_seconds(name: str, scale: Scale) -> float:
    """About how long the fault of scenario ``name`` lasts, from the first start."""
    return {
        "kill_storm": 1.0 * scale.kills,
        "restart_fast": 3.0,
        "restart_immediate": 3.0,
        "flap": 1.5 + 2.0 * scale.restarts,
        "freeze": 1.5 + scale.freeze_seconds,
        "failover": 4.0 + PROMOTE_AFTER,
        "failover_async": 4.0 + PROMOTE_AFTER,
        "starve": 1.0 + scale.freeze_seconds,
        "zombie": 1.0 + 3 * LEASE_SECONDS,
    }.get(name, 0.0)


def steps_for(name: str, scale: Scale) -> int:
    """Steps per run, so that runs are still in flight when the fault ends."""
    return int(fault_seconds(name, scale) / scale.step_seconds) + 4


@dataclass
class Result:
    """One scenario's figures (see the module docstring)."""

    world: str
    scenario: str
    runs: str = "-"
    stuck: int = 0
    bad: int = 0
    never_run: int = 0
    dup_results: int = 0
    reexec: int = 0
    dup_holders: int = 0
    drain_s: float = 0.0
    log_lines: int = 0
    reported_s: float | None = None
    starts_lost: int = 0
    results_lost: int = 0
    exited: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every correctness invariant held (losses excepted for ``failover_async``)."""
        losses = 0 if self.scenario == "failover_async" else sum(getattr(self, n) for n in LOSSES)
        return not (
            self.stuck or self.bad or self.never_run or self.dup_results or self.exited or losses
        )


class Scene:
    """The worker processes of one scenario, their logs and the step journal."""

    def __init__(self, url: str, directory: Path, scale: Scale) -> None:
        self.url = url
        self.directory = directory
        self.scale = scale
        self.journal = directory / "journal.log"
        self.journal.touch()
        self.workers: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.reported_s: float | None = None
        """Seconds from freezing the server to the first line a worker logged."""
        self.killed: set[int] = set()
        """The workers the fault killed (the rest must not exit by themselves)."""
        self.pair: pg_server.PgPair | None = None
        """The primary and standby of a failover scenario."""
        self.acknowledged: list[str] = []
        """Runs whose start returned while the fault went on (``failover``)."""
        self.holders: dict[str, set[str]] = defaultdict(set)
        """Unique pair -> the runs whose start claiming it returned (``failover``)."""

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start one more ``wf worker`` process."""
        log = self.directory / f"worker-{len(self.logs)}.log"
        env = {
            **os.environ,
            "CHAOS_JOURNAL": str(self.journal),
            "CHAOS_STEP_SECONDS": str(self.scale.step_seconds),
            "PYTHONPATH": str(ROOT),
        }
        command = [sys.executable, "-m", "cli", "worker", "benchmarks.chaos_app"]
        command += ["--world", self.url, "--lease-seconds", str(LEASE_SECONDS)]
        command += ["--concurrency", "256"]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
        self.workers.append(proc)
        self.logs.append(log)
        return proc

    def live(self) -> list[subprocess.Popen[bytes]]:
        """The worker processes still running."""
        return [proc for proc in self.workers if proc.poll() is None]

    async def busy(self, within: float = 120.0) -> None:
        """Wait until the workers run steps (a few have finished): the fault hits a
        workload in flight, not workers still importing on a loaded machine."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.journal.read_text().count("end ") >= 2 * self.scale.workers:
                return
            await anyio.sleep(0.1)

    def exited(self) -> int:
        """How many workers stopped by themselves (not killed by the fault)."""
        return sum(
            1 for proc in self.workers if proc.poll() is not None and proc.pid not in self.killed
        )

    def stop(self) -> None:
        """Stop every worker: SIGCONT and SIGTERM, then SIGKILL after 10 s."""
        for proc in self.live():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.workers:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log_lines(self) -> int:
        """The most lines one worker wrote to its stderr."""
        return max((len(log.read_text(errors="replace").splitlines()) for log in self.logs),
                   default=0)  # fmt: skip


async def patiently(call: Callable[[], Awaitable[Any]], within: float = 60.0) -> Any:
    """``call()``, again while the world is unavailable, for up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except (WorldError, OSError):
            if time.monotonic() > deadline:
                raise
            await anyio.sleep(0.25)


# ---------------------------------------------------------------------------- faults

Fault = Callable[[Scene, Path | None], Awaitable[None]]


async def kill_storm(scene: Scene, server: Path | None) -> None:
    for _ in range(scene.scale.kills):
        await anyio.sleep(1.0)
        victims = scene.live()
        if victims:
            victim = random.choice(victims)
            scene.killed.add(victim.pid)
            victim.kill()
        scene.spawn()


def restart(mode: str, times: int = 1, pause: float = 1.0) -> Fault:
    async def fault(scene: Scene, server: Path | None) -> None:
        assert server is not None
        await anyio.sleep(1.5)
        for i in range(times):
            if i:
                await anyio.sleep(pause)
            await anyio.to_thread.run_sync(pg_server.restart, server, mode)

    return fault


async def flap(scene: Scene, server: Path | None) -> None:
    await restart("immediate", scene.scale.restarts)(scene, server)


async def freeze(scene: Scene, server: Path | None) -> None:
    assert server is not None
    await anyio.sleep(1.5)
    sizes = [log.stat().st_size for log in scene.logs]
    pg_server.freeze(server)
    frozen_at = time.monotonic()
    try:
        while time.monotonic() - frozen_at < scene.scale.freeze_seconds:
            grown = any(
                log.stat().st_size > size for log, size in zip(scene.logs, sizes, strict=False)
            )
            if grown and scene.reported_s is None:
                scene.reported_s = round(time.monotonic() - frozen_at, 1)
            await anyio.sleep(0.1)
    finally:
        pg_server.thaw(server)


async def failover(scene: Scene, server: Path | None) -> None:
    """Crash the primary while starts and claims go on, promote the standby."""
    pair = scene.pair
    assert pair is not None
    async with worlds.open(scene.url) as world, anyio.create_task_group() as group:
        group.start_soon(keep_starting, scene, world)
        await scene.busy()
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(pg_server.kill, pair.primary.directory)
        await anyio.sleep(PROMOTE_AFTER)
        await anyio.to_thread.run_sync(pg_server.promote, pair.standby.directory)
        await anyio.sleep(2.0)  # starts go on against the new primary
        group.cancel_scope.cancel()


async def keep_starting(scene: Scene, world: World) -> None:
    """Start a ``holder`` run claiming a new pair, and one claiming an older pair
    (refused unless its claim was lost), again and again; note what was acknowledged."""
    for number in range(1_000_000):
        for slot in (f"slot-{number}", f"slot-{number // 2}"):
            try:
                run = await start(holder, slot, attributes={"slot": Unique(slot)}, world=world)
            except AttributeConflictError:
                continue
            except WorldError:
                await anyio.sleep(0.05)  # the outcome is unknown: nothing acknowledged
                continue
            scene.acknowledged.append(run.id)
            scene.holders[slot].add(run.id)


async def starve(scene: Scene, server: Path | None) -> None:
    """``BURNERS`` busy loops in processes of their own while the runs go on."""
    await scene.busy()
    burn = [sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(burn) for _ in range(BURNERS)]
    try:
        await anyio.sleep(scene.scale.freeze_seconds)
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


async def zombie(scene: Scene, server: Path | None) -> None:
    await anyio.sleep(1.0)
    victim = scene.workers[0]
    victim.send_signal(signal.SIGSTOP)
    await anyio.sleep(LEASE_SECONDS * 3)
    victim.send_signal(signal.SIGCONT)


FAULTS: dict[str, Fault] = {
    "kill_storm": kill_storm,
    "restart_fast": restart("fast"),
    "restart_immediate": restart("immediate"),
    "flap": flap,
    "freeze": freeze,
    "failover": failover,
    "failover_async": failover,
    "starve": starve,
    "zombie": zombie,
}

# ---------------------------------------------------------------------------- checks


def read_journal(path: Path) -> dict[tuple[str, int], list[tuple[str, float]]]:
    """(run, step) -> [(start|end, time)] in time order."""
    entries: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 6:
            kind, run_id, number, _, _, moment = parts
            entries[(run_id, int(number))].append((kind, float(moment)))
    for lines in entries.values():
        lines.sort(key=lambda entry: entry[1])
    return entries


async def check_runs(
    world: World, result: Result, run_ids: list[str], steps: int, journal: Path
) -> None:
    """Fill in ``result`` from the runs' logs and the journal."""
    entries = read_journal(journal)
    completed = 0
    for index, run_id in enumerate(run_ids):
        run = await patiently(lambda run_id=run_id: world.get_run(run_id))  # type: ignore[misc]
        if run is None:
            result.starts_lost += 1
            continue
        events = await patiently(lambda run_id=run_id: world.read_events(run_id))  # type: ignore[misc]
        if run.status is RunStatus.COMPLETED:
            completed += 1
            value = await patiently(lambda run_id=run_id: get_run(run_id, world=world).result(5))  # type: ignore[misc]
            if value != index + sum(range(steps)):
                result.bad += 1
        else:
            result.stuck += 1
            error = "" if run.error is None else f": {run.error.message}"
            result.notes.append(f"run {run_id} is {run.status.value}{error}")
        lost = results_lost(run_id, events, entries)
        result.results_lost += len(lost)
        result.notes += [f"result lost: {step}" for step in lost]
        results = Counter(e.step for e in events if isinstance(e, StepCompleted))
        result.dup_results += sum(1 for count in results.values() if count > 1)
        for number in results:
            lines = entries.get((run_id, number), [])
            if not any(kind == "end" for kind, _ in lines):
                result.never_run += 1
    for lines in entries.values():
        finished = False
        for kind, _ in lines:
            if kind == "start" and finished:
                result.reexec += 1
            elif kind == "end":
                finished = True

    result.runs = f"{completed}/{len(run_ids)}"


def results_lost(
    run_id: str, events: list[Any], entries: dict[tuple[str, int], list[tuple[str, float]]]
) -> list[str]:
    """The steps of run ``run_id`` whose result was recorded, then lost, then recorded again.

    A run schedules step ``m`` only once the result of every step before it is
    committed, so a step ``m`` that started before the time of the recorded
    result of an earlier step ``n`` (the one in the final log) was let go by
    another result of ``n``, which the world no longer has. (A body run again
    from a worker's stale cache does not count: its commit is refused and the
    recorded result stays the first.)
    """
    first_start = {
        number: min(at for kind, at in lines if kind == "start")
        for (other, number), lines in entries.items()
        if other == run_id and any(kind == "start" for kind, _ in lines)
    }
    lost = []
    for event in events:
        if isinstance(event, StepCompleted):
            recorded = event.at.timestamp() - CLOCK_SLACK
            if any(m > event.step and at < recorded for m, at in first_start.items()):
                lost.append(f"{run_id} step {event.step}")
    return lost


async def check_holders(world: World, result: Result, scene: Scene) -> None:
    """Count the acknowledged ``holder`` starts lost and the pairs held twice."""
    for run_id in scene.acknowledged:
        if await patiently(lambda run_id=run_id: world.get_run(run_id)) is None:  # type: ignore[misc]
            result.starts_lost += 1
    for slot, holders in scene.holders.items():
        claim = await patiently(lambda slot=slot: world.find_claim("slot", slot))  # type: ignore[misc]
        if len(holders) > 1 or claim is None or claim.run_id not in holders:
            result.dup_holders += 1
    result.notes.append(f"{len(scene.acknowledged)} holder starts acknowledged during the fault")


async def wait_closed(world: World, run_ids: list[str]) -> float:
    """Wait until every run is closed (or the drain timeout passes); return when."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    pending = set(run_ids)
    while pending and time.monotonic() < deadline:
        for run_id in sorted(pending):
            run = await patiently(lambda run_id=run_id: world.get_run(run_id))  # type: ignore[misc]
            if run is not None and run.status.is_closed:
                pending.discard(run_id)
        if pending:
            await anyio.sleep(0.25)
    return time.monotonic()


# ---------------------------------------------------------------------------- scenarios


async def run_scenario(
    kind: str,
    url: str,
    name: str,
    scale: Scale,
    directory: Path,
    server: Path | None,
    pair: pg_server.PgPair | None = None,
) -> Result:
    """One run-based scenario: workers, runs, the fault, the drain, the checks."""
    result = Result(world=kind, scenario=name)
    began = time.monotonic()
    scene = Scene(url, directory, scale)
    scene.pair = pair
    async with worlds.open(url) as world:
        await patiently(world.migrate)
        for _ in range(scale.workers):
            scene.spawn()
        try:
            steps = steps_for(name, scale)
            run_ids = []
            for seed in range(scale.runs):
                run = await patiently(lambda seed=seed: start(chain, steps, seed, world=world))  # type: ignore[misc]
                run_ids.append(run.id)
            await FAULTS[name](scene, server)
            fault_over = time.monotonic()
            drained = await wait_closed(world, run_ids + scene.acknowledged)
            result.drain_s = round(drained - fault_over, 1)
            result.exited = scene.exited()
        finally:
            scene.stop()
        await check_runs(world, result, run_ids, steps, scene.journal)
        if pair is not None:
            await check_holders(world, result, scene)
    result.log_lines = scene.log_lines()
    result.reported_s = scene.reported_s
    result.seconds = round(time.monotonic() - began, 1)
    return result


def contend(url: str, values: int, seed: int) -> None:
    """Subcommand: start a ``holder`` run for each value, in random order; print outcomes."""

    async def main() -> None:
        outcomes: list[list[str]] = []
        order = list(range(values))
        random.Random(seed).shuffle(order)
        async with worlds.open(url) as world:

            async def one(value: int) -> None:
                slot = f"slot-{value}"
                try:
                    run = await start(holder, slot, attributes={"slot": Unique(slot)}, world=world)
                    outcomes.append([slot, run.id])
                except AttributeConflictError:
                    outcomes.append([slot, ""])

            async with anyio.create_task_group() as group:
                for value in order:
                    group.start_soon(one, value)
        print(json.dumps(outcomes))

    anyio.run(main)


async def run_contention(kind: str, url: str, scale: Scale, directory: Path) -> Result:
    """Several processes race to claim the same pairs while workers run the holders."""
    result = Result(world=kind, scenario="contention")
    began = time.monotonic()
    scene = Scene(url, directory, scale)
    async with worlds.open(url) as world:
        await patiently(world.migrate)
        for _ in range(scale.workers):
            scene.spawn()
        try:
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            command = [sys.executable, str(Path(__file__)), "contend", url, str(scale.values)]
            procs = [
                subprocess.Popen([*command, str(seed)], env=env, stdout=subprocess.PIPE)
                for seed in range(scale.contenders)
            ]
            created: dict[str, set[str]] = defaultdict(set)
            for proc in procs:
                out, _ = proc.communicate(timeout=120)
                if proc.returncode != 0:
                    result.notes.append(f"a contender exited with {proc.returncode}")
                for slot, run_id in json.loads(out or b"[]"):
                    if run_id:
                        created[slot].add(run_id)
            fault_over = time.monotonic()
            run_ids = sorted(run_id for ids in created.values() for run_id in ids)
            drained = await wait_closed(world, run_ids)
            result.drain_s = round(drained - fault_over, 1)
        finally:
            scene.stop()
        completed = 0
        for slot in (f"slot-{value}" for value in range(scale.values)):
            claim = await world.find_claim("slot", slot)
            holders = created.get(slot, set())
            if len(holders) > 1 or claim is None or holders != {claim.run_id}:
                result.dup_holders += 1
        for run_id in run_ids:
            run = await world.get_run(run_id)
            if run is not None and run.status is RunStatus.COMPLETED:
                completed += 1
            else:
                result.stuck += 1
        result.runs = f"{completed}/{len(run_ids)}"
    result.log_lines = scene.log_lines()
    result.seconds = round(time.monotonic() - began, 1)
    return result


# ---------------------------------------------------------------------------- main

COLUMNS = ("world", "scenario", "runs", "stuck", "bad", "never_run", "dup_results", "reexec",
           "dup_holders", "starts_lost", "results_lost", "exited", "drain_s", "log_lines",
           "reported_s", "seconds")  # fmt: skip


def table(results: list[Result]) -> str:
    """The results as a Markdown table."""
    rows = [[str(asdict(result)[column]) for column in COLUMNS] for result in results]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


async def suite(kinds: list[str], names: list[str], scale: Scale, root: Path) -> list[Result]:
    """Every requested scenario on every requested world."""
    results: list[Result] = []
    server_dir: Path | None = None
    try:
        for kind in kinds:
            for name in names:
                if kind == "sqlite" and name in SERVER_SCENARIOS:
                    continue
                directory = root / f"{kind}-{name}"
                directory.mkdir()
                print(f"... {kind} {name}", file=sys.stderr, flush=True)
                if name in FAILOVER_SCENARIOS:
                    result = await run_failover(name, scale, directory)
                    print(table([result]).splitlines()[-1], file=sys.stderr, flush=True)
                    results.append(result)
                    continue
                if kind == "sqlite":
                    url = f"sqlite:///{directory}/world.db"
                else:
                    if server_dir is None:
                        server_dir = Path(tempfile.mkdtemp(prefix="wf-chaos-pg-"))
                        pg_server.start(server_dir, durable=True)
                    port = int((server_dir / "port").read_text())
                    url = f"postgresql://postgres@127.0.0.1:{port}/postgres?schema=chaos_{name}"
                if name == "contention":
                    result = await run_contention(kind, url, scale, directory)
                else:
                    result = await run_scenario(kind, url, name, scale, directory, server_dir)
                print(table([result]).splitlines()[-1], file=sys.stderr, flush=True)
                results.append(result)
    finally:
        if server_dir is not None:
            pg_server.thaw(server_dir)
            pg_server.stop(server_dir)
            shutil.copy(server_dir / "server.log", root / "server.log")
            shutil.rmtree(server_dir, ignore_errors=True)
    return results


async def run_failover(name: str, scale: Scale, directory: Path) -> Result:
    """A failover scenario on a primary and standby of its own (durable, fsync on)."""
    pair_dir = Path(tempfile.mkdtemp(prefix="wf-chaos-pair-"))
    try:
        synchronous = name == "failover"
        pair = await anyio.to_thread.run_sync(
            lambda: pg_server.start_pair(pair_dir, synchronous=synchronous, durable=True)
        )
        url = f"{pair.url}?schema=chaos_{name}"
        return await run_scenario("postgres", url, name, scale, directory, None, pair)
    finally:
        for member in ("primary", "standby"):
            log = pair_dir / member / "server.log"
            if log.exists():
                shutil.copy(log, directory / f"{member}.log")
        pg_server.stop(pair_dir)
        shutil.rmtree(pair_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Run the suite; print the table; exit 1 if an invariant failed."""
    if argv[:1] == ["contend"]:
        contend(argv[1], int(argv[2]), int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small scale")
    parser.add_argument("--tiny", action="store_true", help="a smaller scale still")
    parser.add_argument("--worlds", default="sqlite,postgres")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--keep", action="store_true", help="keep the journals and worker logs (path printed)"
    )
    args = parser.parse_args(argv)
    kinds = [kind for kind in args.worlds.split(",") if kind]
    names = [name for name in args.scenarios.split(",") if name]
    unknown = sorted(set(names) - set(SCENARIOS)) + sorted(set(kinds) - {"sqlite", "postgres"})
    if unknown:
        parser.error(f"unknown scenarios or worlds: {unknown}")
    scale = TINY if args.tiny else QUICK if args.quick else FULL
    root = Path(tempfile.mkdtemp(prefix="wf-chaos-"))
    try:
        results = anyio.run(suite, kinds, names, scale, root)
    finally:
        if args.keep:
            print(f"journals and worker logs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    failed = [f"{r.world} {r.scenario}" for r in results if not r.ok]
    if failed:
        print(f"invariants violated in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
