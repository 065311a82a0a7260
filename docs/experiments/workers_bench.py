"""Two workers against one, on the same batch (issue 13's benchmark, not a test).

    .venv/bin/python docs/experiments/workers_bench.py [--batch 16] [--warm N]
    python3 docs/experiments/workers_bench.py --device cuda --database sqlite  # 2 GPUs

Starts the topology of tests/test_topology.py (a throwaway PostgreSQL or a SQLite file,
redis-server, the server with DISPATCHER=celery, N workers, the compose commands; on
cuda worker i grades on GPU i), sends a fixed batch of
real gradings (the safe-softmax reference and its mutants, one student each) at once,
and times from the first submission to the last stored result; once with one worker,
once with two. Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from postgres import ThrowawayPostgres  # noqa: E402
from test_topology import ADMIN, Topology  # noqa: E402

FILES = sorted((REPO / "reference_solutions" / "safe_softmax").glob("**/*.py"))


def run(pg: ThrowawayPostgres | None, workers: int, batch: int, warm: str | None,
        device: str, settle_s: float, logs: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="workers-bench-") as tmp:
        database = pg.new_database() if pg else f"sqlite:///{tmp}/bench.db"
        top = Topology(database, Path(tmp), device=device)
        if warm is not None:
            top.worker_env["GRADER_WARM"] = warm
        try:
            top.start_redis()
            top.start_server(0)
            for i in range(workers):
                top.start_worker(f"w{i + 1}", server=0, gpu_index=i if device == "cuda" else None)
            time.sleep(settle_s)  # the workers' slots make their runners ready
            admin = {"Authorization": f"Bearer {ADMIN}"}
            roster = httpx.post(f"{top.bases[0]}/api/admin/students", headers=admin, timeout=30,
                                json={"students": [{"username": f"b{i:02d}", "display_name": "B"}
                                                   for i in range(batch)]}).json()["students"]
            started = time.monotonic()
            sent = []
            for i, student in enumerate(roster):
                source = FILES[i % len(FILES)].read_text()
                r = httpx.post(f"{top.bases[0]}/api/submissions", timeout=30,
                               headers={"Authorization": f"Bearer {student['token']}"},
                               json={"exercise": "safe_softmax", "language": "triton",
                                     "source": source})
                sent.append((student["token"], r.json()["id"]))
            # one admin listing a second: polling each submission would load the server,
            # on a 2-core machine as much as a worker does
            ids = {sid for _, sid in sent}
            verdicts: Counter = Counter()
            while True:
                rows = httpx.get(f"{top.bases[0]}/api/admin/submissions", headers=admin,
                                 timeout=30).json()["submissions"]
                done = [r for r in rows if r["id"] in ids and r["status"] in ("graded", "error")]
                if len(done) == len(ids):
                    break
                time.sleep(1.0)
            finished = time.monotonic()
            for r in done:
                verdicts[str(r.get("verdict") or r["status"])] += 1
            return {"workers": workers, "batch": batch, "seconds": finished - started,
                    "verdicts": dict(verdicts)}
        finally:
            top.stop()
            if logs is not None:  # the server's, redis's and each worker's log
                logs.mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    shutil.copy(log, logs / f"{workers}-workers-{log.name}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warm", help="runners each worker keeps ready (default: the device's)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    p.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    p.add_argument("--settle", type=float, default=20.0,
                   help="seconds for the workers' runners to be made before the batch")
    args = p.parse_args()
    pg = ThrowawayPostgres() if args.database == "postgres" else None
    try:
        one = run(pg, 1, args.batch, args.warm, args.device, args.settle, args.logs)
        print(f"1 worker: {one['seconds']:.1f} s {one['verdicts']}", flush=True)
        two = run(pg, 2, args.batch, args.warm, args.device, args.settle, args.logs)
        print(f"2 workers: {two['seconds']:.1f} s {two['verdicts']}", flush=True)
    finally:
        if pg:
            pg.stop()
    gpus = ""
    if args.device == "cuda":
        import torch

        gpus = f", {torch.cuda.device_count()} × {torch.cuda.get_device_name(0)}"
    print(f"\n{platform.node()}, {os.cpu_count()} CPUs{gpus}, {time.strftime('%Y-%m-%d')}, "
          f"{args.device}, {args.database}, batch of {args.batch} safe-softmax gradings "
          f"(reference and mutants), warm runners per worker: {args.warm or 'default'}\n")
    print("| workers | batch | seconds | gradings/min | speed-up | verdicts |\n"
          "|---|---|---|---|---|---|")
    for r in (one, two):
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r["verdicts"].items()))
        print(f"| {r['workers']} | {r['batch']} | {r['seconds']:.1f} | "
              f"{60 * r['batch'] / r['seconds']:.1f} | {one['seconds'] / r['seconds']:.2f}× | "
              f"{verdicts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
