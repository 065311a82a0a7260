"""One student's burst cannot stop the class (issue 39), against the real server.

Tried as a hostile student would: one valid token sent 200 ``GET /api/submissions/1`` at
once; 80 were answered 500 (the database pool starved), 119 not within 90 s, and another
student waited 20 s. Here the attacker sends 200 and then 1,000 at once, each on its own
connection, and opens 200 progress streams; meanwhile another student asks for their own
submissions every 50 ms. Nobody gets a 5xx, every request of the attacker's is answered
(200, or 429 at once past their budget), the other student's p99 stays under two seconds
(the issue's second is measured in docs/benchmarks.md), and
``/api/health`` answers within a second after. On SQLite and PostgreSQL, and with the
Celery dispatcher and two server processes.

The attacker connects from 127.0.0.2 and the other student from 127.0.0.1: two machines,
as in a class (the loopback range is all this host's).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import httpx
import pytest

from conftest import REPO
from server.core.connections import raise_file_limit
from services import free_port, start_redis
from test_server_api import ADMIN

ATTACKER_ADDRESS, CLASSMATE_ADDRESS = "127.0.0.2", "127.0.0.1"


# -- the real server ------------------------------------------------------------------------

def _server_env(database_url: str, tmp_path, **extra: str) -> dict[str, str]:
    return dict(os.environ, DATABASE_URL=database_url, ADMIN_TOKEN=ADMIN, GRADER_DEVICE="cpu",
                GRADER_COMMAND=f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}",
                FAKE_GRADER_LOG=str(tmp_path / "grader.log"),
                MAX_CONNECTIONS_PER_CLIENT="3000", **extra)


@contextmanager
def running_server(env: dict[str, str], log_path):
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "server", "--port", str(port)],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/api/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, \
                    f"the server did not start: {log_path.read_text()[-2000:]}"
                time.sleep(0.2)
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _class_of_two(port: int) -> dict[str, str]:
    base = f"http://127.0.0.1:{port}"
    r = httpx.post(f"{base}/api/admin/students", headers={"Authorization": f"Bearer {ADMIN}"},
                   json={"students": [{"username": "mallory", "display_name": "Mallory"},
                                      {"username": "bob", "display_name": "Bob"}]})
    assert r.status_code == 200, r.text
    return {s["username"]: s["token"] for s in r.json()["students"]}


def _submit(port: int, token: str, source: str) -> int:
    r = httpx.post(f"http://127.0.0.1:{port}/api/submissions",
                   headers={"Authorization": f"Bearer {token}"},
                   json={"exercise": "safe_softmax", "language": "triton", "source": source})
    assert r.status_code == 202, r.text
    return r.json()["id"]


# -- the attacker: N requests at once, each on its own connection, from a process of its own

def burst(port: int, path: str, token: str, n: int, hold_s: float = 0.0) -> list[int | None]:
    done = subprocess.run([sys.executable, str(REPO / "tests" / "hostile_burst.py"), str(port),
                           path, token, str(n), str(hold_s)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


# -- the classmate: asks every 50 ms throughout ---------------------------------------------

class Classmate(threading.Thread):
    def __init__(self, port: int, token: str):
        super().__init__(daemon=True)
        self.port, self.token = port, token
        self.seconds: list[float] = []
        self.statuses: list[int | None] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            started = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                              source_address=(CLASSMATE_ADDRESS, 0))
            try:
                conn.request("GET", "/api/submissions",
                             headers={"Authorization": f"Bearer {self.token}"})
                response = conn.getresponse()
                response.read()
                self.statuses.append(response.status)
            except OSError:
                self.statuses.append(None)
            finally:
                conn.close()
            self.seconds.append(time.monotonic() - started)
            self._done.wait(0.05)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=60)

    def p99(self) -> float:
        """Within the samples (never extrapolated past the slowest)."""
        return statistics.quantiles(self.seconds, n=100, method="inclusive")[98]


def _health_seconds(port: int) -> float:
    started = time.monotonic()
    assert httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=30).status_code == 200
    return time.monotonic() - started


def _probe(attack_port: int, classmate_port: int, tokens: dict[str, str], sid: int,
           results: dict) -> None:
    """200 and 1,000 GETs at once, then 200 streams held open for 3 s, with the
    classmate asking throughout."""
    classmate = Classmate(classmate_port, tokens["bob"])
    classmate.start()
    try:
        time.sleep(0.5)
        for n in (200, 1000):
            results[f"get{n}"] = burst(attack_port, f"/api/submissions/{sid}", tokens["mallory"], n)
        results["streams"] = burst(attack_port, f"/api/submissions/{sid}/events",
                                   tokens["mallory"], 200, hold_s=3.0)
        time.sleep(0.5)
    finally:
        classmate.stop()
    results["classmate"] = classmate
    results["health_after_s"] = max(_health_seconds(p) for p in {attack_port, classmate_port})


def _said(results: dict) -> str:
    """One line of figures, as docs/benchmarks.md quotes them."""
    classmate = sorted(results["classmate"].seconds)
    counts = "; ".join(f"{name}: " + ", ".join(f"{results[name].count(s)}×{s}"
                                                for s in sorted(set(results[name]), key=str))
                       for name in ("get200", "get1000", "streams"))
    return (f"{counts}; classmate {len(classmate)} requests, p50 "
            f"{statistics.median(classmate) * 1000:.0f} ms, p99 "
            f"{results['classmate'].p99() * 1000:.0f} ms, max {classmate[-1] * 1000:.0f} ms; "
            f"health after {results['health_after_s'] * 1000:.0f} ms")


def _judge(results: dict) -> None:
    print("\n" + _said(results))
    for name in ("get200", "get1000", "streams"):
        statuses = results[name]
        assert None not in statuses, f"{name}: {statuses.count(None)} got no answer"
        assert set(statuses) <= {200, 429}, f"{name}: {sorted(set(statuses))}"
        assert 200 in statuses, f"{name}: the student's own requests were all refused"
    # the budget holds: 4 streams a student, the rest refused at once
    assert results["streams"].count(200) <= 4
    classmate = results["classmate"]
    assert classmate.statuses and set(classmate.statuses) == {200}, set(classmate.statuses)
    # the goal is a second, measured in docs/benchmarks.md; the regression this
    # guards waited 20 s. The same box running about twice as slowly (2026-12) gave 1.10 s
    # on PostgreSQL beside the other pytest process, so the test allows two
    assert classmate.p99() < 2.0, f"the classmate's p99: {classmate.p99():.2f} s"
    assert results["health_after_s"] < 1.0


@pytest.fixture(autouse=True)
def _sockets():
    raise_file_limit()  # 1,000 connections at once, each a descriptor here


def test_one_students_burst_leaves_the_class_answered(database_url, tmp_path):
    with running_server(_server_env(database_url, tmp_path), tmp_path / "server.log") as port:
        tokens = _class_of_two(port)
        # the attacker's submission is graded, then waits: its streams stay open
        sid = _submit(port, tokens["mallory"], "# fake: sleep 30 passed 100\n")
        _submit(port, tokens["bob"], "# fake: passed 100\n")
        results: dict = {}
        _probe(port, port, tokens, sid, results)
    _judge(results)


def test_the_burst_with_the_celery_dispatcher_and_two_server_processes(postgres, tmp_path):
    """The attacker hammers one server process; the classmate asks the other."""
    database_url = postgres.new_database()
    redis_port = free_port()
    redis = start_redis(redis_port)
    try:
        env = _server_env(database_url, tmp_path, DISPATCHER="celery",
                          BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
                          TASK_SECRET="a-task-secret-of-the-tests-0123456789")
        with running_server(env, tmp_path / "server1.log") as first, \
                running_server(env, tmp_path / "server2.log") as second:
            tokens = _class_of_two(first)
            sid = _submit(first, tokens["mallory"], "# fake: passed 100\n")  # no worker: waits
            results: dict = {}
            _probe(first, second, tokens, sid, results)
    finally:
        redis.kill()
    _judge(results)


def test_a_crowd_of_unknown_tokens_costs_only_their_address(tmp_path):
    """Random tokens buy no budget of their own: before a credential has been accepted, it
    counts against its address. 300 at once from one address, each a new token: the
    address's budget answers some 401, the rest 429, none 5xx; the classmate is served."""
    with running_server(_server_env(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path),
                        tmp_path / "server.log") as port:
        tokens = _class_of_two(port)
        classmate = Classmate(port, tokens["bob"])
        classmate.start()

        try:
            statuses = burst(port, "/api/submissions", "guess-{:04d}", 300)
        finally:
            classmate.stop()
    assert None not in statuses and set(statuses) <= {401, 429}, sorted(set(statuses))
    assert 401 in statuses
    assert set(classmate.statuses) == {200} and classmate.p99() < 2.0  # as in _judge


def test_the_429_says_when_to_come_back(tmp_path):
    """Past the budget: 429 at once, with Retry-After and the reason in words; the
    student's next request, once theirs have finished, is served."""
    with running_server(_server_env(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path,
                                    MAX_REQUESTS_PER_STUDENT="1"), tmp_path / "s.log") as port:
        tokens = _class_of_two(port)
        sid = _submit(port, tokens["mallory"], "# fake: sleep 30 passed 100\n")
        answers = asyncio.run(_raw_burst(port, f"/api/submissions/{sid}", tokens["mallory"], 50))
        after = httpx.get(f"http://127.0.0.1:{port}/api/submissions/{sid}",
                          headers={"Authorization": f"Bearer {tokens['mallory']}"})
    refused = [a for a in answers if a.startswith(b"HTTP/1.1 429")]
    assert refused and len(refused) < 50
    head, _, body = refused[0].partition(b"\r\n\r\n")
    assert b"\r\nretry-after: 1\r\n" in head.lower()
    assert "1 requests in flight" in json.loads(body)["detail"]
    assert after.status_code == 200


async def _raw_burst(port: int, path: str, token: str, n: int) -> list[bytes]:
    async def one() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                       local_addr=(ATTACKER_ADDRESS, 0))
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 60)
        writer.close()
        return answer
    return await asyncio.gather(*(one() for _ in range(n)))
