"""Two CPU workers against one, on the same batch (issue 13's benchmark, not a test).

    .venv/bin/python docs/experiments/workers_bench.py [--batch 16] [--warm N]

Starts the topology of tests/test_topology.py (throwaway PostgreSQL, redis-server, the
server with DISPATCHER=celery, N CPU workers, the compose commands), sends a fixed batch of
real gradings (the safe-softmax reference and its mutants, one student each) at once,
and times from the first submission to the last stored result; once with one worker,
once with two. Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from postgres import ThrowawayPostgres  # noqa: E402
from test_topology import ADMIN, Topology  # noqa: E402

FILES = sorted((REPO / "reference_solutions" / "safe_softmax").glob("**/*.py"))


def run(pg: ThrowawayPostgres, workers: int, batch: int, warm: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="workers-bench-") as tmp:
        top = Topology(pg.new_database(), Path(tmp))
        if warm is not None:
            top.worker_env["GRADER_WARM"] = warm
        try:
            top.start_redis()
            top.start_server()
            for i in range(workers):
                top.start_worker(f"w{i + 1}")
            time.sleep(20)  # the workers' slots make their runners ready
            admin = {"Authorization": f"Bearer {ADMIN}"}
            roster = httpx.post(f"{top.base}/api/admin/students", headers=admin, timeout=30,
                                json={"students": [{"username": f"b{i:02d}", "display_name": "B"}
                                                   for i in range(batch)]}).json()["students"]
            started = time.monotonic()
            sent = []
            for i, student in enumerate(roster):
                source = FILES[i % len(FILES)].read_text()
                r = httpx.post(f"{top.base}/api/submissions", timeout=30,
                               headers={"Authorization": f"Bearer {student['token']}"},
                               json={"exercise": "safe_softmax", "language": "triton",
                                     "source": source})
                sent.append((student["token"], r.json()["id"]))
            pending = dict(sent)
            while pending:
                for token, sid in list(pending.items()):
                    status = httpx.get(f"{top.base}/api/submissions/{sid}", timeout=30,
                                       headers={"Authorization": f"Bearer {token}"}).json()
                    if status["status"] in ("graded", "error"):
                        del pending[token]
                time.sleep(0.2)
            return {"workers": workers, "batch": batch, "seconds": time.monotonic() - started}
        finally:
            top.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warm", help="runners each worker keeps ready (default: the device's)")
    args = p.parse_args()
    pg = ThrowawayPostgres()
    try:
        one = run(pg, 1, args.batch, args.warm)
        print(f"1 worker: {one['seconds']:.1f} s", flush=True)
        two = run(pg, 2, args.batch, args.warm)
        print(f"2 workers: {two['seconds']:.1f} s", flush=True)
    finally:
        pg.stop()
    print(f"\n{platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}, "
          f"batch of {args.batch} safe-softmax gradings (reference and mutants), warm "
          f"runners per worker: {args.warm or 'default'}\n")
    print("| workers | batch | seconds | gradings/min | speed-up |\n|---|---|---|---|---|")
    for r in (one, two):
        print(f"| {r['workers']} | {r['batch']} | {r['seconds']:.1f} | "
              f"{60 * r['batch'] / r['seconds']:.1f} | {one['seconds'] / r['seconds']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
