"""The public leaderboard under load (issue 12): requests a second and p99, 10,000 graded.

    .venv/bin/python docs/experiments/leaderboard_bench.py [--submissions 10000] [--seconds 10]

Fills a fresh SQLite database with students and graded submissions (each with a grading
result as the graders write it), starts the real server on it (`python -m server`), and
has client processes ask for `/api/leaderboard/safe_softmax` over keep-alive connections
as fast as they can, while one more client times `/api/health`. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sqlalchemy import insert  # noqa: E402

from server.db import make_engine  # noqa: E402
from server.migrate import upgrade  # noqa: E402
from server.models import GradeRun, Role, Status, Submission, User  # noqa: E402

EXERCISES = ["safe_softmax", "masked_softmax", "online_softmax"]


def fill(url: str, students: int, submissions: int) -> None:
    engine = make_engine(url)
    upgrade(engine)
    rng = random.Random(1)
    now = datetime.now(timezone.utc)
    with engine.begin() as db:
        db.execute(insert(User), [{"id": i + 1, "username": f"s{i}", "display_name": f"Student {i}",
                                   "role": Role.STUDENT, "token_hash": f"{i:064x}",
                                   "created_at": now} for i in range(students)])
        subs, runs = [], []
        for n in range(submissions):
            score = round(rng.uniform(0, 200), 2)
            subs.append({"id": n + 1, "user_id": rng.randrange(students) + 1,
                         "exercise": rng.choice(EXERCISES), "language": "triton",
                         "filename": "k.py", "source": "x" * 3000, "status": Status.GRADED,
                         "attempts": 1, "late": False, "flag": "none", "verdict": "passed",
                         "score": score, "created_at": now - timedelta(seconds=n)})
            result = {"verdict": "passed", "score": score, "device": "cuda",
                      "device_name": "NVIDIA H200", "checks": [
                          {"name": f"c{k}", "passed": True, "message": "passed", "points": 12.5,
                           "max_points": 12.5} for k in range(8)],
                      "performance": {"fraction_of_copy": 0.9, "gbs": 3500.0, "points": 90.0,
                                      "shapes": [{"label": f"shape {k}", "ms": 0.04,
                                                  "gbs": 3500.0, "fraction": 0.9}
                                                 for k in range(8)]},
                      "output": "", "grader_version": "bench"}
            runs.append({"submission_id": n + 1, "verdict": "passed", "score": score,
                         "result": result, "grader_version": "bench", "created_at": now})
        db.execute(insert(Submission), subs)
        db.execute(insert(GradeRun), runs)
    engine.dispose()


def _client(port: int, path: str, seconds: float, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
        latencies.append(time.perf_counter() - started)
    out.put((path, latencies))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--submissions", type=int, default=10000)
    p.add_argument("--students", type=int, default=300)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=4)
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="board-bench-")
    url = f"sqlite:///{tmp}/db.sqlite"
    fill(url, args.students, args.submissions)
    port = _free_port()
    env = dict(os.environ, DATABASE_URL=url, ADMIN_TOKEN="bench-token-0123456789",
               GRADER_DEVICE="cpu",
               GRADER_COMMAND=f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}")
    server = subprocess.Popen([sys.executable, "-m", "server", "--port", str(port)], cwd=REPO,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/api/health")
                break
            except OSError:
                time.sleep(0.2)
        board = json.loads(_get(port, "/api/leaderboard/safe_softmax"))
        out = multiprocessing.Queue()
        workers = [multiprocessing.Process(target=_client, args=(
            port, "/api/leaderboard/safe_softmax", args.seconds, out))
            for _ in range(args.clients)]
        health = multiprocessing.Process(target=_client, args=(
            port, "/api/health", args.seconds, out))
        for w in workers + [health]:
            w.start()
        results = [out.get(timeout=args.seconds + 60) for _ in workers + [health]]
        for w in workers + [health]:
            w.join()
    finally:
        server.terminate()
        server.wait(timeout=30)
    board_lat = [x for path, r in results if path != "/api/health" for x in r]
    health_lat = [x for path, r in results if path == "/api/health" for x in r]
    print(f"{args.submissions} graded submissions, {args.students} students, "
          f"{len(board['entries'])} on the safe_softmax board; {args.clients} clients on it and "
          f"one on /api/health, {args.seconds:g} s, {os.cpu_count()} cores")
    print("| leaderboard requests/s | p50 ms | p99 ms | max ms | /api/health p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(board_lat) / args.seconds:.0f} | {statistics.median(board_lat) * 1000:.1f} | "
          f"{pct(board_lat, 0.99) * 1000:.1f} | {max(board_lat) * 1000:.1f} | "
          f"{statistics.median(health_lat) * 1000:.1f} | {pct(health_lat, 0.99) * 1000:.1f} |")
    return 0


def _get(port: int, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    return conn.getresponse().read().decode()


if __name__ == "__main__":
    sys.exit(main())
