"""Scale-out with real parts (issue 13): PostgreSQL, redis-server, the server with
DISPATCHER=celery and two CPU workers, started with the commands docker/compose.yaml runs.

A burst of 300 submissions from 60 students; during it one worker is killed -9
mid-grading (and started again), redis is killed -9 and restarted empty, and the server
is killed -9 and restarted. At the end every submission that got a 202 has exactly one
grade_runs row: none lost, none graded twice. Most of the burst are files that do not
parse (answered without a runner); a few are real gradings, some slow on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter

import httpx
import pytest
from sqlalchemy import create_engine, func, select

from conftest import REPO
from services import free_port, start_redis
from server.models import GradeRun, Status, Submission

ADMIN = "topology-admin-token-0123"
SECRET = "topology-task-secret-0123"
STUDENTS, EACH = 60, 5
QUICK = "def softmax(x:\n    return x\n"  # does not parse: compile_error, no runner
SLOW = ("import time\ntime.sleep(4)  # a slow import: the worker is mid-grading for seconds\n"
        "\n\ndef softmax(x):\n    return x.clone()\n")
REAL = (REPO / "reference_solutions" / "safe_softmax" / "solution.py").read_text()

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="needs Debian's redis-server (scripts/setup installs it)")


class Topology:
    """The processes of docker/compose.yaml, run natively."""

    def __init__(self, database_url: str, tmp, device: str = "cpu"):
        self.tmp, self.device = tmp, device
        self.redis_port, self.port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        broker = f"redis://127.0.0.1:{self.redis_port}/0"
        clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ADMIN_TOKEN")}
        self.server_env = dict(clean, DATABASE_URL=database_url, ADMIN_TOKEN=ADMIN,
                               DISPATCHER="celery", BROKER_URL=broker, GRADER_QUEUE=device,
                               TASK_SECRET=SECRET, GRADER_DEVICE=device,
                               MAX_IN_FLIGHT_PER_STUDENT=str(EACH),
                               SUBMISSIONS_PER_HOUR="1000", MAX_QUEUE_DEPTH="1000",
                               PUBLISH_TIMEOUT_S="15", HEARTBEAT_TIMEOUT_S="10")
        # a worker's environment: the broker, the server's URL, its device; no credentials
        self.worker_env = dict(clean, BROKER_URL=broker, SERVER_URL=self.base,
                               GRADER_DEVICE=device)
        self.redis = self.server = None
        self.workers: dict[str, subprocess.Popen] = {}

    def _log(self, name):
        return open(self.tmp / f"{name}.log", "ab")

    def start_redis(self) -> None:
        self.redis = start_redis(self.redis_port, self._log("redis"))

    def start_server(self) -> None:
        self.server = subprocess.Popen([sys.executable, "-m", "server", "--port", str(self.port)],
                                       cwd=REPO, env=self.server_env, stdout=self._log("server"),
                                       stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/api/health").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("the server did not start")

    def start_worker(self, name: str, gpu_index: int | None = None) -> None:
        env = dict(self.worker_env, WORKER_NAME=name)
        if gpu_index is not None:
            env["GRADER_GPU_INDEX"] = str(gpu_index)
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "graders.remote_worker", "worker",
             "--pool", "solo", "-Q", self.device, "-n", f"{name}@%h", "--without-gossip",
             "--without-mingle", "-l", "INFO"],
            cwd=REPO, env=env, stdout=self._log(name), stderr=subprocess.STDOUT)

    def stop(self) -> None:
        for proc in [*self.workers.values(), self.server, self.redis]:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def _wait(what, predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def test_a_burst_survives_a_lost_worker_broker_and_server(postgres, tmp_path):
    database_url = postgres.new_database()
    engine = create_engine(database_url)
    top = Topology(database_url, tmp_path)

    def count(*where):
        with engine.connect() as c:
            return c.scalar(select(func.count()).select_from(Submission).where(*where))

    try:
        top.start_redis()
        top.start_server()
        for name in ("w1", "w2"):
            top.start_worker(name)
        admin = {"Authorization": f"Bearer {ADMIN}"}
        roster = httpx.post(f"{top.base}/api/admin/students", headers=admin, timeout=30, json={
            "students": [{"username": f"s{i:02d}", "display_name": f"S{i:02d}"}
                         for i in range(STUDENTS)]}).json()["students"]
        tokens = [s["token"] for s in roster]
        # a real grading in each stretch between the kills; two slow ones just before the
        # worker is killed at k == 40, so that it is mid-grading then
        sources = [REAL if k % 60 == 7 else SLOW if k in (31, 32) else QUICK
                   for k in range(STUDENTS * EACH)]
        accepted, codes = [], Counter()
        killed = set()
        for k, source in enumerate(sources):
            try:
                r = httpx.post(f"{top.base}/api/submissions", timeout=30,
                               headers={"Authorization": f"Bearer {tokens[k % STUDENTS]}"},
                               json={"exercise": "safe_softmax", "language": "triton",
                                     "source": source})
                codes[r.status_code] += 1
                if r.status_code == 202:
                    accepted.append(r.json()["id"])
            except httpx.HTTPError:
                codes["no answer"] += 1  # the server is down: not acknowledged, not counted
            if k == 40:  # a worker mid-grading, killed
                _wait("w1 grading", lambda: count(Submission.status == Status.RUNNING,
                                                  Submission.worker == "w1",
                                                  Submission.heartbeat_at.isnot(None)) > 0, 120)
                top.workers["w1"].kill()
                killed.add("worker w1")
            if k == 100:
                top.start_worker("w1")
                top.redis.kill()  # the broker, with every message in it
                top.redis.wait()
                killed.add("redis")
                time.sleep(2)
                top.start_redis()
            if k == 200:
                top.server.kill()
                top.server.wait()
                killed.add("server")
                top.start_server()
        ids = set(accepted)
        _wait("every accepted submission graded",
              lambda: count(Submission.id.in_(ids),
                            Submission.status.in_([Status.GRADED, Status.ERROR])) == len(ids),
              420)
        with engine.connect() as c:
            runs = Counter(dict(c.execute(select(GradeRun.submission_id, func.count())
                                          .group_by(GradeRun.submission_id)).all()))
            verdicts = Counter(v for (v,) in c.execute(select(Submission.verdict)
                                                       .where(Submission.id.in_(ids))))
            attempts = Counter(a for (a,) in c.execute(select(Submission.attempts)
                                                       .where(Submission.id.in_(ids))))
        lost = [i for i in ids if runs[i] == 0]
        twice = [i for i in ids if runs[i] > 1]
        print(f"\ntopology: {len(sources)} sent, answers {dict(codes)}, {len(ids)} acknowledged;"
              f" killed -9: {sorted(killed)}\n  graded once: {sum(runs[i] == 1 for i in ids)},"
              f" lost: {len(lost)}, graded twice: {len(twice)}\n  verdicts: {dict(verdicts)}"
              f"\n  attempts per submission: {dict(sorted(attempts.items()))}")
        assert killed == {"worker w1", "redis", "server"}
        assert len(ids) >= 290
        assert lost == [] and twice == []
        assert verdicts["passed"] >= 1 and verdicts["compile_error"] >= 250
    finally:
        top.stop()
        engine.dispose()
