"""Run every core workload for us and for DBOS, side by side, and report ratios.

Each (peer, workload) pair runs in a fresh process, ``--repeat`` times,
alternating peers so that machine noise hits both alike; the median counts.
Both sides run SQLite at equal durability: ours at its default,
``synchronous=FULL`` in WAL mode; DBOS at SQLite's default (it sets no
pragma): ``synchronous=FULL`` with a rollback journal. Every acknowledged
commit of either survives power loss.

Per workload, so that a regression shows in any of them:

* the ratio to DBOS (medians of wf/s);
* the share of the disk's commit ceiling: ``commit_ceiling.py`` measures,
  right before, how many tiny ``synchronous=FULL`` transactions per second the
  disk allows; a workflow of ``s`` steps needs at least ``1 + s`` commits
  unbatched (its start, each step), so the share is wf/s x (1 + s) / ceiling
  (group commit at 64 in flight can pass 100%);
* CPU ms per workflow (``time.process_time`` over the timed part, every
  thread of the process) and SQL statements per workflow (every statement
  sent to SQLite, ``BEGIN``/``COMMIT`` included, ``sqlite_statements.py``),
  for both peers;
* fsyncs per workflow and per step, counted with
  ``strace -f -c -e trace=fsync,fdatasync`` around the whole process (setup
  and warm-up included, divided by every workflow and step it ran, warm-ups
  included). Without strace the fsync columns are empty.

A full run (3 repeats, default sizes) takes a few minutes; ``--quick`` is a smoke run.

Writes ``benchmarks/results/core.json`` (or ``--out``) and prints a Markdown table.

Usage::

    python benchmarks/run_core.py [--repeat 3] [--quick] [--ours-tree DIR] [--out FILE]

``--ours-tree`` runs our side from another checkout (``git worktree add
/tmp/main main``: the figures before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKLOADS = ["one_step_sequential", "one_step_concurrent", "steps_10", "steps_1000"]
QUICK_N = {"one_step_sequential": 100, "one_step_concurrent": 300, "steps_10": 5, "steps_1000": 1}
STEPS = {"one_step_sequential": 1, "one_step_concurrent": 1, "steps_10": 10, "steps_1000": 1000}
IN_FLIGHT = 64
"""Workflows in flight in ``one_step_concurrent``, on both sides."""
DURABILITY = {
    "ours": "SQLite WAL, synchronous=FULL (the default)",
    "dbos": "SQLite rollback journal, synchronous=FULL (SQLite's default; DBOS sets none)",
}


def _totals(peer: str, workload: str, n: int) -> tuple[int, int]:
    """Workflows and steps one process runs, warm-ups included (as the scripts do)."""
    steps = STEPS[workload]
    if peer == "ours":  # five warm-up workflows of the measured kind
        return n + 5, (n + 5) * steps
    warmups = 20 if workload == "one_step_concurrent" else 5  # of up to 10 steps
    return n + warmups, n * steps + warmups * min(steps, 10)


def run(peer: str, workload: str, quick: bool, tree: Path | None = None) -> dict[str, Any]:
    script = HERE / ("ours.py" if peer == "ours" else "dbos_peer.py")
    env = dict(os.environ)
    if peer == "ours" and tree is not None:
        script = tree / "benchmarks" / "ours.py"
        env["PYTHONPATH"] = f"{tree}{os.pathsep}{env.get('PYTHONPATH', '')}"
    command = [sys.executable, str(script), workload, "--concurrency", str(IN_FLIGHT)]
    if quick:
        command += ["--n", str(QUICK_N[workload])]
    strace = shutil.which("strace")
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "strace.txt"
        done = subprocess.run(
            _traced(strace, command, counts) if strace else command,
            capture_output=True,
            text=True,
            check=True,
            timeout=900,
            env=env,
        )
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        fsyncs = _fsyncs(counts) if strace else None
    workflows, steps = _totals(peer, workload, int(result["n"]))
    result["fsync_per_workflow"] = None if fsyncs is None else fsyncs / workflows
    result["fsync_per_step"] = None if fsyncs is None else fsyncs / steps
    return result


def _traced(strace: str, command: list[str], counts: Path) -> list[str]:
    """``command`` under strace, counting fsync and fdatasync calls into ``counts``."""
    return [strace, "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(counts), *command]


def _fsyncs(counts: Path) -> int:
    """The fsync and fdatasync calls in an ``strace -c`` summary."""
    total = 0
    for line in counts.read_text().splitlines():
        match = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$", line)
        if match:
            total += int(match.group(1))
    return total


def ceiling() -> dict[str, int]:
    """Raw SQLite commits per second at FULL and NORMAL (``commit_ceiling.py``)."""
    done = subprocess.run(
        [sys.executable, str(HERE / "commit_ceiling.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    measured: dict[str, int] = json.loads(done.stdout)["commits_per_second"]
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    parser.add_argument("--ours-tree", type=Path, help="run our side from this checkout")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "core.json")
    parser.add_argument("--workloads", nargs="+", default=WORKLOADS, choices=WORKLOADS)
    args = parser.parse_args()
    limit = ceiling()
    print(json.dumps({"commit_ceiling": limit}), file=sys.stderr)
    rows = []
    for workload in args.workloads:
        samples: dict[str, list[dict[str, Any]]] = {"ours": [], "dbos": []}
        for _ in range(args.repeat):
            samples["ours"].append(run("ours", workload, args.quick, args.ours_tree))
            samples["dbos"].append(run("dbos", workload, args.quick))
        row: dict[str, Any] = {"workload": workload}
        for peer in ("ours", "dbos"):
            runs = samples[peer]
            row[f"{peer}_wf_s"] = statistics.median(s["workflows_per_second"] for s in runs)
            for key in (
                "fsync_per_workflow",
                "fsync_per_step",
                "cpu_ms_per_workflow",
                "statements_per_workflow",
            ):
                values = [s[key] for s in runs if s.get(key) is not None]
                row[f"{peer}_{key}"] = statistics.median(values) if values else None
            if runs[0]["seconds_per_step"] is not None:
                row[f"{peer}_ms_per_step"] = 1000 * statistics.median(
                    s["seconds_per_step"] for s in runs
                )
        row["ratio"] = row["ours_wf_s"] / row["dbos_wf_s"]
        row["ours_ceiling_share"] = row["ours_wf_s"] * (1 + STEPS[workload]) / limit["full"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    args.out.parent.mkdir(exist_ok=True)
    durability = dict(DURABILITY)
    if args.ours_tree is not None:
        durability["ours"] = f"the default of the checkout {args.ours_tree}"
    report = {
        "repeat": args.repeat,
        "in_flight": IN_FLIGHT,
        "durability": durability,
        "commit_ceiling": limit,
        "rows": rows,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"ours: {durability['ours']}; DBOS: {durability['dbos']}")
    print(f"raw commit ceiling: {limit['full']}/s at FULL, {limit['normal']}/s at NORMAL")
    print()
    print(
        "| workload | ours (wf/s) | DBOS (wf/s) | ours / DBOS | ours fsync/wf | DBOS fsync/wf "
        "| ours ms/step | DBOS ms/step | ours / commit ceiling | ours CPU ms/wf "
        "| DBOS CPU ms/wf | ours stmts/wf | DBOS stmts/wf |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per_step = (
            f"{r['ours_ms_per_step']:.3f} | {r['dbos_ms_per_step']:.3f}"
            if "ours_ms_per_step" in r
            else "- | -"
        )
        print(
            f"| {r['workload']} | {r['ours_wf_s']:.1f} | {r['dbos_wf_s']:.1f} "
            f"| {r['ratio']:.2f}x | {_num(r['ours_fsync_per_workflow'])} "
            f"| {_num(r['dbos_fsync_per_workflow'])} | {per_step} "
            f"| {100 * r['ours_ceiling_share']:.0f}% "
            f"| {_num(r['ours_cpu_ms_per_workflow'])} | {_num(r['dbos_cpu_ms_per_workflow'])} "
            f"| {_num(r['ours_statements_per_workflow'])} "
            f"| {_num(r['dbos_statements_per_workflow'])} |"
        )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
