"""A remote worker's healthcheck (graders/service/worker_alive.py, issue 27): fresh while its slot
lives, stale once the slot is gone, whether or not a grading is running."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from services import free_port, start_redis

from graders.service.worker_alive import is_alive, keep_beating


def test_the_heartbeat_is_fresh_while_the_slot_lives_and_goes_stale_after(tmp_path):
    path = tmp_path / "alive"
    slot_lives = [True]
    stop = keep_beating(lambda: slot_lives[0], path, every_s=0.05)
    try:
        deadline = time.monotonic() + 5
        while not path.exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert is_alive(path, stale_s=1.0)
        slot_lives[0] = False  # the slot died: the beat stops
        time.sleep(0.2)
        stamp = path.stat().st_mtime
        time.sleep(0.2)
        assert path.stat().st_mtime == stamp
        os.utime(path, (stamp - 120, stamp - 120))
        assert not is_alive(path, stale_s=60)
    finally:
        stop.set()


def test_the_healthcheck_command_exits_by_the_files_age(tmp_path):
    path = tmp_path / "alive"
    check = [sys.executable, "-m", "graders.service.worker_alive"]
    env = dict(os.environ, WORKER_HEARTBEAT_FILE=str(path))
    assert subprocess.run(check, cwd=REPO, env=env).returncode == 1  # no beat yet
    path.touch()
    assert subprocess.run(check, cwd=REPO, env=env).returncode == 0


def _celery_worker(tmp_path, **env_changes) -> tuple[subprocess.CompletedProcess, Path]:
    """A Celery worker against a real redis-server and no server; its end and its
    heartbeat file."""
    if shutil.which("redis-server") is None:
        pytest.skip("needs Debian's redis-server (scripts/setup installs it)")
    port = free_port()
    redis = start_redis(port)
    heartbeat = tmp_path / "alive"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ADMIN_TOKEN")}
    env.update(BROKER_URL=f"redis://127.0.0.1:{port}/0", SERVER_URL="http://127.0.0.1:9",
               TASK_SECRET="worker-alive-task-secret-0123",
               GRADER_DEVICE="cuda", GRADER_GPU_INDEX="99", GRADER_WARM="1",
               WORKER_HEARTBEAT_FILE=str(heartbeat))
    env.update(env_changes)
    env = {k: v for k, v in env.items() if v is not None}
    try:
        worker = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "graders.service.remote_worker", "worker",
             "--pool", "solo", "-Q", "cuda", "-n", "broken@%h", "--without-gossip", "--without-mingle"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    finally:
        redis.kill()
        redis.wait()
    return worker, heartbeat


def test_a_worker_whose_slot_cannot_start_leaves_the_queue_and_says_why(tmp_path):
    """It took task after task and failed each in seconds while counting as in service
    (issue 27). Here its runners cannot start (GPU 99: no such device, on any host): the
    Celery worker exits 3 before taking any task, names the cause, and never beats."""
    worker, heartbeat = _celery_worker(tmp_path)
    assert worker.returncode == 3, worker.stderr[-2000:]
    assert "out of service: its slot did not start" in worker.stderr
    assert "torch sees no CUDA device" in worker.stderr  # the runner's own words
    assert not heartbeat.exists()


def test_a_worker_without_the_task_secret_takes_no_work(tmp_path):
    """Tasks carry no credential any more (issue 27): a worker without TASK_SECRET could
    grade but never report, so it exits 3 at start, saying so."""
    worker, heartbeat = _celery_worker(tmp_path, TASK_SECRET=None)
    assert worker.returncode == 3, worker.stderr[-2000:]
    assert "TASK_SECRET is not set" in worker.stderr
    assert not heartbeat.exists()


def test_the_grading_slot_says_ready_only_once_a_runner_has_proved_itself():
    """`python -m graders worker` said {"ready": true} at once, then failed every job."""
    proc = subprocess.run([sys.executable, "-m", "graders", "worker", "--device", "cuda",
                           "--gpu-index", "99", "--warm", "1"], cwd=REPO, input="",
                          capture_output=True, text=True, timeout=200)
    assert proc.returncode == 3
    first = json.loads(proc.stdout.splitlines()[0])
    assert first["ready"] is False and "no CUDA device" in first["problem"]
