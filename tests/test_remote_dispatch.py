"""The Celery dispatcher's promises one by one (issue 13); tests/test_topology.py runs
them all together under kill -9.

- A worker reports with a credential for one task: a forged one is refused, a replayed
  result finds its attempt over.
- The database is the outbox: with the broker down a submission waits as queued, and it is
  published when the broker comes back.
- A worker will not start holding the database's URL or the instructor's token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO
from fastapi.testclient import TestClient
from services import free_port, start_redis, until
from sqlalchemy.orm import selectinload
from test_server_api import add_students, auth, settings_for, submit

from server.app import create_app
from server.domain.models import Status, Submission

SECRET = "remote-dispatch-secret-0123"
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="needs Debian's redis-server (scripts/setup installs it)")


def _token(sid: int, attempt: int, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), f"{sid}:{attempt}".encode(), hashlib.sha256).hexdigest()


def _row(client, sid: int) -> Submission:
    with client.app.state.sessionmaker() as db:
        return db.get(Submission, sid, options=[selectinload(Submission.results)])


def _celery(database_url, port):
    """The app with DISPATCHER=celery (``running``'s own ``dispatcher`` is an object)."""
    settings = settings_for(database_url, dispatcher="celery", grader_queue="cpu",
                            broker_url=f"redis://127.0.0.1:{port}/0", task_secret=SECRET)
    return TestClient(create_app(settings))


def test_a_forged_or_replayed_result_credential_is_refused(tmp_path):
    port = free_port()
    redis = start_redis(port)
    try:
        with _celery(f"sqlite:///{tmp_path / 'db.sqlite'}", port) as client:
            tokens = add_students(client, "ada", "bob")
            sid = submit(client, tokens["ada"]).json()["id"]
            other = submit(client, tokens["bob"]).json()["id"]
            assert until(lambda: _row(client, sid).status is Status.RUNNING)
            attempt = _row(client, sid).attempts
            base = f"/internal/tasks/{sid}/{attempt}"
            result = {"worker": "w", "result": {"verdict": "passed", "score": 100.0,
                                                "checks": [], "device": "cpu"}}

            def post(what, token, body=None, path=base):
                return client.post(f"{path}/{what}", json=body or {"worker": "w"},
                                   headers={"X-Task-Token": token}).status_code

            # forged: another secret, another submission's token, none at all
            assert post("start", _token(sid, attempt, "guessed-secret")) == 403
            assert post("start", _token(other, attempt)) == 403
            assert post("result", "", result) == 403
            assert _row(client, sid).status is Status.RUNNING and not _row(client, sid).results
            # the real credential: started, then stored once
            assert post("start", _token(sid, attempt)) == 200
            assert post("start", _token(sid, attempt)) == 409  # a second worker, same task
            assert post("heartbeat", _token(sid, attempt)) == 200
            assert post("result", _token(sid, attempt), result) == 200
            assert post("result", _token(sid, attempt), result) == 409  # replayed
            # a valid credential for an attempt that never ran
            assert post("result", _token(sid, attempt + 1), result,
                        f"/internal/tasks/{sid}/{attempt + 1}") == 409
            row = _row(client, sid)
            assert row.status is Status.GRADED and len(row.results) == 1
    finally:
        redis.kill()
        redis.wait()


def test_a_reader_of_the_broker_finds_no_credential_in_a_task(tmp_path):
    """Each task carried its result credential: anyone who could read Redis could report
    a result for any attempt in flight (issue 27). The worker now makes it from
    TASK_SECRET; the message holds nothing that the server accepts."""
    import redis as redis_client

    port = free_port()
    redis = start_redis(port)
    try:
        with _celery(f"sqlite:///{tmp_path / 'db.sqlite'}", port) as client:
            token = add_students(client, "ada")["ada"]
            sid = submit(client, token).json()["id"]
            broker = redis_client.Redis(port=port)
            assert until(lambda: broker.llen("cpu") > 0)
            attempt = _row(client, sid).attempts
            bodies = [base64.b64decode(json.loads(m)["body"]).decode()
                      for m in broker.lrange("cpu", 0, -1)]
            task = json.loads(bodies[0])[0][0]
            assert task["id"] == sid and task["attempt"] == attempt and "token" not in task
            assert not any(_token(sid, attempt) in body for body in bodies)
            # whatever the message holds, sent as a credential, is refused
            sendable = [v for v in [*map(str, task.values()), bodies[0][:4000]]
                        if v and v.isascii() and v.isprintable()]  # what a header can carry
            for value in sendable:
                assert client.post(f"/internal/tasks/{sid}/{attempt}/start",
                                   json={"worker": "w"},
                                   headers={"X-Task-Token": value}).status_code == 403
    finally:
        redis.kill()
        redis.wait()


def test_a_submission_that_kills_its_worker_ends_after_the_attempt_limit(tmp_path):
    """A lost lease was put back without counting: a submission that kills (or silences)
    every worker that takes it went round for ever (issue 27). Here the test is the worker:
    it takes each task from Redis, starts it, and dies (never says another word)."""
    import redis as redis_client

    port = free_port()
    redis = start_redis(port)
    try:
        settings = settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher="celery",
                                grader_queue="cpu", broker_url=f"redis://127.0.0.1:{port}/0",
                                task_secret=SECRET, heartbeat_timeout_s=1.0,
                                max_grader_attempts=3)
        with TestClient(create_app(settings)) as client:
            token = add_students(client, "ada")["ada"]
            sid = submit(client, token).json()["id"]
            broker = redis_client.Redis(port=port)
            for attempt in (1, 2, 3):
                message = None

                def took() -> bool:
                    nonlocal message
                    message = broker.rpop("cpu")
                    return message is not None

                assert until(took, 30), f"attempt {attempt} was not published"
                task = json.loads(base64.b64decode(json.loads(message)["body"]))[0][0]
                assert (task["id"], task["attempt"]) == (sid, attempt)
                r = client.post(f"/internal/tasks/{sid}/{attempt}/start", json={"worker": "w"},
                                headers={"X-Task-Token": _token(sid, attempt)})
                assert r.status_code == 200  # ... and the worker dies here
            assert until(lambda: _row(client, sid).status is Status.ERROR, 30)
            row = _row(client, sid)
            assert row.leases_lost == 3 and len(row.results) == 1
            assert "lost its worker 3 times" in row.results[0].result["message"]
            assert broker.llen("cpu") == 0  # not published a fourth time
            seen = client.get(f"/api/submissions/{sid}", headers=auth(token)).json()
            assert seen["status"] == "error"
            assert "autograder_ended_after_lost_leases_total 1.0" in client.get("/metrics").text
    finally:
        redis.kill()
        redis.wait()


def test_with_the_broker_down_submissions_wait_queued_and_go_when_it_is_back(tmp_path):
    port = free_port()  # nothing listens there yet
    with _celery(f"sqlite:///{tmp_path / 'db.sqlite'}", port) as client:
        token = add_students(client, "ada")["ada"]
        r = submit(client, token)
        assert r.status_code == 202  # stored, acknowledged
        sid = r.json()["id"]
        # the publisher tries (a refused connection takes kombu ~6 s) and puts it back
        assert until(lambda: client.app.state.dispatcher.broker_up is False, 30)
        assert until(lambda: _row(client, sid).status is Status.QUEUED, 10)
        redis = start_redis(port)
        try:
            assert until(lambda: _row(client, sid).status is Status.RUNNING, 30)
            assert _row(client, sid).dispatched_at is not None
            # the claim commits `running` before send_task returns and sets the flag:
            # wait for the flag rather than racing the publisher's thread
            assert until(lambda: client.app.state.dispatcher.broker_up is True, 30)
        finally:
            redis.kill()
            redis.wait()


@pytest.mark.parametrize("name", ["DATABASE_URL", "ADMIN_TOKEN"])
def test_a_worker_refuses_to_start_with_credentials_it_must_not_hold(name):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ADMIN_TOKEN")}
    proc = subprocess.run([sys.executable, "-c", "import graders.service.remote_worker"], cwd=REPO,
                          env=dict(env, **{name: "postgresql://secret"}), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0
    assert f"refusing to start with {name}" in proc.stderr
    clean = subprocess.run([sys.executable, "-c", "import graders.service.remote_worker"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0, clean.stderr
