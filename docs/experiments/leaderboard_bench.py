"""The public leaderboard under load (issues 12 and 26): requests a second and p99.

    .venv/bin/python docs/experiments/leaderboard_bench.py [--submissions 10000] [--seconds 10]

Fills a fresh SQLite database with students and graded submissions (each with a grading
result as the graders write it), starts the real server on it (`python -m server`, its
grading slot polling the empty queue as it does), and runs each scenario in turn: N
keep-alive connections (threads in four client processes) ask for the API's board or the
page as fast as they can, one more times `/api/health`, and, where it says so, a fifth
process signs a student in five times a second through the sign-in form (each sign-in
commits). Prints one markdown table; the goal is >= 500 requests/s and p99 < 100 ms.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import threading
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

from server.core.db import make_engine  # noqa: E402
from server.core.migrate import upgrade  # noqa: E402
from server.domain.models import GradeRun, Role, Status, Submission, User  # noqa: E402

EXERCISES = ["safe_softmax", "masked_softmax", "online_softmax"]


def fill(url: str, students: int, submissions: int) -> None:
    engine = make_engine(url)
    upgrade(engine)
    rng = random.Random(1)
    now = datetime.now(timezone.utc)
    with engine.begin() as db:
        db.execute(insert(User), [{"id": i + 1, "username": f"s{i}", "display_name": f"Student {i}",
                                   "role": Role.STUDENT, "token_hash": _hash(student_token(i)),
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


def student_token(i: int) -> str:
    return f"bench-student-token-{i:05d}"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _asker(port: int, path: str, seconds: float, latencies: list[float],
           student: int | None) -> None:
    """Asks for ``path`` on one keep-alive connection; as a signed-in student if one is given."""
    headers = {"Cookie": _sign_in(port, student)} if student is not None else {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
        latencies.append(time.perf_counter() - started)


def _sign_in(port: int, student: int) -> str:
    """Signs a student in through the form (GET /signin, then POST it); returns the
    Cookie header a browser would send afterwards."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/signin")
    page = conn.getresponse()
    html = page.read().decode()
    seed = re.search(r"autograder_csrf=([^;]+)", page.getheader("set-cookie") or "").group(1)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)
    conn.request("POST", "/signin", body=f"token={student_token(student)}&csrf={token}",
                 headers={"Content-Type": "application/x-www-form-urlencoded",
                          "Cookie": f"autograder_csrf={seed}"})
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 303, answer.status
    session = re.search(r"autograder_session=([^;]+)", answer.getheader("set-cookie")).group(1)
    conn.close()
    return f"autograder_csrf={seed}; autograder_session={session}"


def _client(port: int, path: str, seconds: float, connections: int, out,
            first_student: int | None = None) -> None:
    """One process: ``connections`` threads, each on its own keep-alive connection (each
    signed in as a student of its own from ``first_student`` on, if given)."""
    latencies: list[float] = []
    threads = [threading.Thread(target=_asker, args=(
        port, path, seconds, latencies, None if first_student is None else first_student + k))
        for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((path, latencies))


def _signer(port: int, seconds: float, per_second: float, students: int, out) -> None:
    """Signs students in through the form, ``per_second``."""
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        _sign_in(port, done % students)
        done += 1
        time.sleep(max(0.0, 1 / per_second - (time.monotonic() - started)))
    out.put(("signin", [float(done)]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


SCENARIOS = [  # (what, path, connections, signed in, sign-ins a second)
    ("API", "/api/leaderboard/safe_softmax", 16, False, 0),
    ("API", "/api/leaderboard/safe_softmax", 64, False, 0),
    ("page", "/leaderboard/safe_softmax", 16, False, 0),
    ("page", "/leaderboard/safe_softmax", 64, False, 0),
    ("page", "/leaderboard/safe_softmax", 16, True, 0),
    ("API", "/api/leaderboard/safe_softmax", 16, False, 5),
    ("page", "/leaderboard/safe_softmax", 16, True, 5),
]


def run_scenario(port: int, path: str, connections: int, signed_in: bool, signins: float,
                 seconds: float, students: int) -> dict:
    out = multiprocessing.Queue()
    per = connections // 4
    procs = [multiprocessing.Process(target=_client, args=(
        port, path, seconds, per, out, k * per if signed_in else None)) for k in range(4)]
    procs.append(multiprocessing.Process(target=_client, args=(port, "/api/health", seconds,
                                                               1, out)))
    if signins:
        procs.append(multiprocessing.Process(target=_signer, args=(port, seconds, signins,
                                                                   students, out)))
    for proc in procs:
        proc.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join()
    board = [x for what, r in results if what == path for x in r]
    health = [x for what, r in results if what == "/api/health" for x in r]
    signed = sum(r[0] for what, r in results if what == "signin")
    return {"rps": len(board) / seconds, "p50": statistics.median(board) * 1000,
            "p99": pct(board, 0.99) * 1000, "max": max(board) * 1000,
            "health_p99": pct(health, 0.99) * 1000, "signins": signed / seconds}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--submissions", type=int, default=10000)
    p.add_argument("--students", type=int, default=300)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="board-bench-")
    url = f"sqlite:///{tmp}/db.sqlite"
    fill(url, args.students, args.submissions)
    port = _free_port()
    env = dict(os.environ, DATABASE_URL=url, ADMIN_TOKEN="bench-token-0123456789",
               COURSE_SECRET="bench-course-secret-0123456789", GRADER_DEVICE="cpu",
               GRADER_COMMAND=f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}")
    server = subprocess.Popen([sys.executable, "-m", "server", "--port", str(port)], cwd=REPO,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/api/health")
                break
            except OSError:
                time.sleep(0.2)
        board = json.loads(_get(port, "/api/leaderboard/safe_softmax"))
        for what, path, connections, signed_in, signins in SCENARIOS:
            rows.append((what + (", signed in" if signed_in else ""), connections, signins,
                         run_scenario(port, path, connections, signed_in, signins,
                                      args.seconds, args.students)))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{args.submissions} graded submissions, {args.students} students, "
          f"{len(board['entries'])} on the safe_softmax board; {args.seconds:g} s a scenario, "
          f"{os.cpu_count()} cores shared by server and clients")
    print("| asked | connections | sign-ins/s | requests/s | p50 ms | p99 ms | max ms "
          "| /api/health p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for what, connections, signins, r in rows:
        print(f"| {what} | {connections} | {r['signins']:.1f} | {r['rps']:.0f} | {r['p50']:.1f} | "
              f"{r['p99']:.1f} | {r['max']:.1f} | {r['health_p99']:.1f} |")
    return 0


def _get(port: int, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    return conn.getresponse().read().decode()


if __name__ == "__main__":
    sys.exit(main())
