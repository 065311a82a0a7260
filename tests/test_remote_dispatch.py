"""The Celery dispatcher's promises one by one (issue 13); tests/test_topology.py runs
them all together under kill -9.

- A worker reports with a credential for one task: a forged one is refused, a replayed
  result finds its attempt over.
- The database is the outbox: with the broker down a submission waits as queued, and it is
  published when the broker comes back.
- A worker will not start holding the database's URL or the instructor's token.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import subprocess
import sys
import time

import pytest
from sqlalchemy.orm import selectinload

from conftest import REPO
from server.models import Status, Submission
from fastapi.testclient import TestClient

from server.app import create_app
from services import free_port, start_redis
from test_server_api import add_students, settings_for, submit

SECRET = "remote-dispatch-secret-0123"
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="needs Debian's redis-server (scripts/setup installs it)")


def _token(sid: int, attempt: int, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), f"{sid}:{attempt}".encode(), hashlib.sha256).hexdigest()


def _row(client, sid: int) -> Submission:
    with client.app.state.sessionmaker() as db:
        return db.get(Submission, sid, options=[selectinload(Submission.results)])


def _until(predicate, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


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
            assert _until(lambda: _row(client, sid).status is Status.RUNNING)
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


def test_with_the_broker_down_submissions_wait_queued_and_go_when_it_is_back(tmp_path):
    port = free_port()  # nothing listens there yet
    with _celery(f"sqlite:///{tmp_path / 'db.sqlite'}", port) as client:
        token = add_students(client, "ada")["ada"]
        r = submit(client, token)
        assert r.status_code == 202  # stored, acknowledged
        sid = r.json()["id"]
        # the publisher tries (a refused connection takes kombu ~6 s) and puts it back
        assert _until(lambda: client.app.state.dispatcher.broker_up is False, 30)
        assert _until(lambda: _row(client, sid).status is Status.QUEUED, 10)
        redis = start_redis(port)
        try:
            assert _until(lambda: _row(client, sid).status is Status.RUNNING, 30)
            assert _row(client, sid).dispatched_at is not None
            # the claim commits `running` before send_task returns and sets the flag:
            # wait for the flag rather than racing the publisher's thread
            assert _until(lambda: client.app.state.dispatcher.broker_up is True, 30)
        finally:
            redis.kill()
            redis.wait()


@pytest.mark.parametrize("name", ["DATABASE_URL", "ADMIN_TOKEN"])
def test_a_worker_refuses_to_start_with_credentials_it_must_not_hold(name):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ADMIN_TOKEN")}
    proc = subprocess.run([sys.executable, "-c", "import graders.remote_worker"], cwd=REPO,
                          env=dict(env, **{name: "postgresql://secret"}), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0
    assert f"refusing to start with {name}" in proc.stderr
    clean = subprocess.run([sys.executable, "-c", "import graders.remote_worker"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0, clean.stderr
