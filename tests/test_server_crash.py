"""Nothing lost: kill -9 the server while a submission is being graded, start it again,
and the submission ends graded exactly once (on SQLite and on PostgreSQL)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, func, select

from conftest import REPO
from server.domain.models import GradeRun, Submission
from services import free_port

ADMIN = "crash-admin-token-0123"


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None



def _start(env, port) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "server", "--port", str(port)], cwd=REPO,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health").status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server did not start")


def _status(port, token, sid) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/api/submissions/{sid}",
                     headers={"Authorization": f"Bearer {token}"}).json()["status"]


def _wait_for(port, token, sid, wanted, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _status(port, token, sid) == wanted:
            return
        time.sleep(0.1)
    raise AssertionError(f"submission {sid} never became {wanted}")


def test_kill_9_while_running_then_restart(database_url, tmp_path):
    log = tmp_path / "grader.log"
    port = free_port()
    env = dict(os.environ, DATABASE_URL=database_url, ADMIN_TOKEN=ADMIN, GRADER_DEVICE="cpu",
               GRADER_COMMAND=f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}",
               FAKE_GRADER_LOG=str(log))
    server = _start(env, port)
    try:
        base = f"http://127.0.0.1:{port}"
        r = httpx.post(f"{base}/api/admin/students", headers={"Authorization": f"Bearer {ADMIN}"},
                       json={"students": [{"username": "ada", "display_name": "Ada"}]})
        token = r.json()["students"][0]["token"]
        r = httpx.post(f"{base}/api/submissions", headers={"Authorization": f"Bearer {token}"},
                       json={"exercise": "safe_softmax", "language": "triton",
                             "source": "# fake: sleep 4 passed 100\n"})
        assert r.status_code == 202
        sid = r.json()["id"]
        _wait_for(port, token, sid, "running")
        deadline = time.monotonic() + 20
        while not log.exists() and time.monotonic() < deadline:  # the grader is at work
            time.sleep(0.05)
        server.send_signal(signal.SIGKILL)
        server.wait()
    finally:
        server.kill()

    # the grader the dead server had started dies with it (gone, or a zombie left to reap)
    time.sleep(1)
    first_pid = int(log.read_text().split()[-1])
    assert _state(first_pid) in (None, "Z", "X")

    server = _start(env, port)
    try:
        _wait_for(port, token, sid, "graded")
        time.sleep(5)  # anything that would grade it a second time has had its chance
    finally:
        server.terminate()
        server.wait(timeout=30)

    engine = create_engine(database_url)
    with engine.connect() as db:
        assert db.scalar(select(func.count()).select_from(Submission)) == 1
        assert db.scalar(select(func.count()).where(GradeRun.submission_id == sid)) == 1
        assert db.scalar(select(Submission.status).where(Submission.id == sid)) == "graded"
    engine.dispose()
    assert len(log.read_text().splitlines()) == 2  # the killed run and the one that counted
