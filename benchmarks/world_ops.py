"""Instructions per workflow of the world operations themselves, under callgrind.

A one-step workflow's world operations, made directly (no worker, no timers,
nothing that polls): ``create_run``, ``lease``, a commit scheduling the step
leased at once, the step's commit, ``lease``, the closing commit. Run under
valgrind's callgrind with few and with more workflows, the difference per
added workflow is what the world's code costs one workflow, start-up and
imports cancelled out: deterministic to about 2% (SQLite's background
checkpoints), where CPU time on a shared machine varies by 30%. For
PostgreSQL it counts the client's instructions only (the server is another
process). Compare checkouts with ``--tree`` (given twice, they alternate).

Usage::

    python benchmarks/world_ops.py [--tree DIR [--tree DIR]] [--worlds memory sqlite postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
FEW, MORE = 50, 150


async def workflows(url: str, n: int) -> None:
    """Make the world operations of ``n`` one-step workflows on ``url``."""
    import worlds
    from worlds.semantics import new_run_id
    from worlds.types import (
        CommitRequest,
        CreateRunRequest,
        NewWorkItem,
        RunCompleted,
        RunStarted,
        StepCompleted,
        StepCreated,
    )

    world = worlds.open(url)
    async with world:
        for _ in range(n):
            run_id = new_run_id()
            await world.create_run(CreateRunRequest(run_id=run_id, workflow="wf", args=b"\x90"))
            (item,) = await world.lease("w", names={"wf"}, limit=1, lease_seconds=30)
            step = NewWorkItem(kind="step", name="s", number=1, payload=b"\x90", lease=True)
            events = (RunStarted(), StepCreated(step=1, name="s", args=b"\x90"))
            begun = CommitRequest(
                run_id=run_id, worker_id="w", lease=item, events=events, schedule=(step,)
            )
            (leased,) = (await world.commit(begun)).leased
            result = StepCompleted(step=1, attempt=1, result=b"\x01")
            wake = NewWorkItem(kind="workflow")
            await world.commit(
                CommitRequest(
                    run_id=run_id, worker_id="w", lease=leased, events=(result,), schedule=(wake,)
                )
            )
            (item,) = await world.lease("w", names={"wf"}, limit=1, lease_seconds=30)
            closing = (RunCompleted(result=b"\x01"),)
            await world.commit(
                CommitRequest(run_id=run_id, worker_id="w", lease=item, events=closing)
            )


def instructions(tree: Path, url: str, n: int) -> int:
    """Instructions a process making ``n`` workflows on ``url`` executes, under callgrind."""
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        command += [sys.executable, str(HERE), "--child", url, "--n", str(n)]
        subprocess.run(command, capture_output=True, check=True, env=env, timeout=3600)
        summary = next(line for line in out.read_text().splitlines() if line[:8] == "summary:")
    return int(summary.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append")
    parser.add_argument("--worlds", nargs="+", default=["memory", "sqlite", "postgres"])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pg-url")
    parser.add_argument("--child")
    parser.add_argument("--n", type=int)
    args = parser.parse_args()
    if args.child:
        import anyio

        anyio.run(workflows, args.child, args.n)
        return
    sys.path.insert(0, str(ROOT))
    from tests import pg_server

    trees: list[Path] = args.tree or [ROOT]
    server, pg_url = None, args.pg_url
    if "postgres" in args.worlds and pg_url is None:
        server = Path(tempfile.mkdtemp(prefix="wf-pg-ops-"))  # the server's user owns it
        pg_url = pg_server.start(server).socket_url
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:

            def url(kind: str) -> str:
                if kind == "memory":
                    return "memory://"
                if kind == "sqlite":
                    return f"sqlite:///{tmp}/{uuid.uuid4().hex}.db"
                assert pg_url is not None
                separator = "&" if "?" in pg_url else "?"
                return f"{pg_url}{separator}schema=ops_{uuid.uuid4().hex[:12]}"

            for kind in args.worlds:
                counts: dict[Path, list[float]] = {tree: [] for tree in trees}
                for _ in range(args.repeat):
                    for tree in trees:
                        few = instructions(tree, url(kind), FEW)
                        more = instructions(tree, url(kind), MORE)
                        counts[tree].append((more - few) / (MORE - FEW))
                for tree in trees:
                    row = {
                        "tree": str(tree),
                        "world": kind,
                        "instructions_per_workflow": round(statistics.median(counts[tree])),
                        "samples": [round(c) for c in counts[tree]],
                    }
                    print(json.dumps(row), file=sys.stderr)
                    rows.append(row)
    finally:
        if server is not None:
            pg_server.stop(server)
            shutil.rmtree(server, ignore_errors=True)
    print("| tree | world | instructions/workflow (median) | samples |")
    print("|---|---|---|---|")
    for r in rows:
        samples = ", ".join(f"{s:,}" for s in r["samples"])
        print(f"| {r['tree']} | {r['world']} | {r['instructions_per_workflow']:,} | {samples} |")


if __name__ == "__main__":
    main()
