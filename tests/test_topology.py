"""Scale-out with real parts (issues 13, 27): PostgreSQL, redis-server, two server
processes with DISPATCHER=celery against the one database (as behind a proxy), and two CPU
workers, started with the commands docker/compose.yaml runs.

A burst of 300 submissions from 60 students, spread over the two servers as a proxy would
(to the other when one does not answer); each worker reports to one of them. During the
burst one worker is killed -9 mid-grading (and started again), redis is killed -9 and
restarted empty, and one server is killed -9 and restarted. At the end every submission
that got a 202 has exactly one grade_runs row: none lost, none graded twice; and both
servers show the same leaderboard. Most of the burst are files that do not
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
from conftest import REPO
from services import free_port, start_redis
from sqlalchemy import create_engine, func, select

from server.domain.models import GradeRun, Status, Submission

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
        self.redis_port, self.ports = free_port(), [free_port(), free_port()]
        self.bases = [f"http://127.0.0.1:{port}" for port in self.ports]
        broker = f"redis://127.0.0.1:{self.redis_port}/0"
        clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ADMIN_TOKEN")}
        self.server_env = dict(clean, DATABASE_URL=database_url, ADMIN_TOKEN=ADMIN,
                               DISPATCHER="celery", BROKER_URL=broker, GRADER_QUEUE=device,
                               TASK_SECRET=SECRET, GRADER_DEVICE=device,
                               MAX_IN_FLIGHT_PER_STUDENT=str(EACH),
                               SUBMISSIONS_PER_HOUR="1000", MAX_QUEUE_DEPTH="1000",
                               PUBLISH_TIMEOUT_S="15", HEARTBEAT_TIMEOUT_S="10")
        # a worker's environment: the broker, a server's URL, its device, the secret that
        # makes its reports' credentials; no database, no instructor token
        self.worker_env = dict(clean, BROKER_URL=broker, GRADER_DEVICE=device,
                               TASK_SECRET=SECRET)
        self.redis = None
        self.servers: list[subprocess.Popen | None] = [None, None]
        self.workers: dict[str, subprocess.Popen] = {}

    def _log(self, name):
        return open(self.tmp / f"{name}.log", "ab")

    def start_redis(self) -> None:
        self.redis = start_redis(self.redis_port, self._log("redis"))

    def start_server(self, n: int) -> None:
        self.servers[n] = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", str(self.ports[n])], cwd=REPO,
            env=self.server_env, stdout=self._log(f"server{n}"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.bases[n]}/api/health").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("the server did not start")

    def start_worker(self, name: str, server: int, gpu_index: int | None = None) -> None:
        env = dict(self.worker_env, WORKER_NAME=name, SERVER_URL=self.bases[server])
        if gpu_index is not None:
            env["GRADER_GPU_INDEX"] = str(gpu_index)
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "graders.service.remote_worker", "worker",
             "--pool", "solo", "-Q", self.device, "-n", f"{name}@%h", "--without-gossip",
             "--without-mingle", "-l", "INFO"],
            cwd=REPO, env=env, stdout=self._log(name), stderr=subprocess.STDOUT)

    def wait_worker_ready(self, name: str, timeout_s: float = 180) -> None:
        """Until celery says the worker consumes, its runners made: 26-28 s on a loaded 2-core
        CI box, past the 10 s in which a published job must start before the reaper
        publishes it again (which a test that expects attempt 1 must not see)."""
        log = self.tmp / f"{name}.log"

        def ready() -> bool:
            text = log.read_text(errors="replace") if log.exists() else ""
            return any(line.rstrip().endswith(" ready.") and f"{name}@" in line
                       for line in text.splitlines())

        _wait(f"worker {name} ready", ready, timeout_s)

    def stop(self) -> None:
        for proc in [*self.workers.values(), *self.servers, self.redis]:
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
        top.start_server(0)
        top.start_server(1)
        for n, name in enumerate(("w1", "w2")):
            top.start_worker(name, server=n)
        admin = {"Authorization": f"Bearer {ADMIN}"}
        roster = httpx.post(f"{top.bases[0]}/api/admin/students", headers=admin, timeout=30, json={
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
            # as a proxy: the servers in turn, the other one when one does not answer
            for base in (top.bases[k % 2], top.bases[1 - k % 2]):
                try:
                    r = httpx.post(f"{base}/api/submissions", timeout=30,
                                   headers={"Authorization": f"Bearer {tokens[k % STUDENTS]}"},
                                   json={"exercise": "safe_softmax", "language": "triton",
                                         "source": source})
                except httpx.HTTPError:
                    codes["no answer"] += 1  # that server is down: not acknowledged
                    continue
                codes[r.status_code] += 1
                if r.status_code == 202:
                    accepted.append(r.json()["id"])
                break
            if k == 40:  # a worker mid-grading, killed
                _wait("w1 grading", lambda: count(Submission.status == Status.RUNNING,
                                                  Submission.worker == "w1",
                                                  Submission.heartbeat_at.isnot(None)) > 0, 120)
                top.workers["w1"].kill()
                killed.add("worker w1")
            if k == 100:
                top.start_worker("w1", server=0)
                top.redis.kill()  # the broker, with every message in it
                top.redis.wait()
                killed.add("redis")
                time.sleep(2)
                top.start_redis()
            if k == 200:
                top.servers[0].kill()
                top.servers[0].wait()
                killed.add("server")
                top.start_server(0)
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
        # each server's leaderboard, kept in its memory, shows the other's results too
        # (server/core/shared_state.py: within about a second)
        time.sleep(2.5)
        boards = [httpx.get(f"{base}/api/leaderboard/safe_softmax", timeout=30).json()
                  for base in top.bases]
        assert boards[0] == boards[1] and boards[0]["entries"]
    finally:
        top.stop()
        engine.dispose()
