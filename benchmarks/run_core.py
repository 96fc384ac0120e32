"""Run every core workload for us and for DBOS, side by side, and report ratios.

Each (peer, workload) pair runs in a fresh process, ``--repeat`` times,
alternating peers so that machine noise hits both alike; the median counts.
Writes ``benchmarks/results/core.json`` and prints a Markdown table.

Usage::

    python benchmarks/run_core.py [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKLOADS = ["one_step_sequential", "one_step_concurrent", "steps_10", "steps_1000"]
QUICK_N = {"one_step_sequential": 100, "one_step_concurrent": 300, "steps_10": 5, "steps_1000": 1}


def run(script: str, workload: str, quick: bool) -> dict[str, Any]:
    command = [sys.executable, str(HERE / script), workload]
    if quick:
        command += ["--n", str(QUICK_N[workload])]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    args = parser.parse_args()
    rows = []
    for workload in WORKLOADS:
        samples: dict[str, list[dict[str, Any]]] = {"ours": [], "dbos": []}
        for _ in range(args.repeat):
            samples["ours"].append(run("ours.py", workload, args.quick))
            samples["dbos"].append(run("dbos_peer.py", workload, args.quick))
        ours = statistics.median(s["workflows_per_second"] for s in samples["ours"])
        dbos = statistics.median(s["workflows_per_second"] for s in samples["dbos"])
        row = {"workload": workload, "ours_wf_s": ours, "dbos_wf_s": dbos, "ratio": ours / dbos}
        if samples["ours"][0]["seconds_per_step"] is not None:
            row["ours_ms_per_step"] = 1000 * statistics.median(
                s["seconds_per_step"] for s in samples["ours"]
            )
            row["dbos_ms_per_step"] = 1000 * statistics.median(
                s["seconds_per_step"] for s in samples["dbos"]
            )
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    out = HERE / "results" / "core.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2) + "\n")
    print("| workload | ours (wf/s) | DBOS (wf/s) | ours / DBOS | ours ms/step | DBOS ms/step |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        per_step = (
            f"{r['ours_ms_per_step']:.3f} | {r['dbos_ms_per_step']:.3f}"
            if "ours_ms_per_step" in r
            else "- | -"
        )
        print(
            f"| {r['workload']} | {r['ours_wf_s']:.1f} | {r['dbos_wf_s']:.1f} "
            f"| {r['ratio']:.2f}x | {per_step} |"
        )


if __name__ == "__main__":
    main()
