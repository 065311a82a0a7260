"""A remote grading worker: the graders plus a thin Celery task (``DISPATCHER=celery``).

    BROKER_URL=redis://broker:6379/0 SERVER_URL=http://server:8000 GRADER_DEVICE=cuda \\
    GRADER_GPU_INDEX=0 celery -A graders.service.remote_worker worker --pool solo -Q cuda

One grading at a time, pinned to one GPU (run one worker per GPU), through the same
``python -m graders worker`` process and sandbox as the server's local slots, its runners
kept warm between tasks. The worker holds no database URL and no instructor token: it
reports the start, the heartbeats and the result of a task with that task's credential
alone (server/api/internal.py), which it makes from TASK_SECRET; the task in the broker
carries none, so that a reader of the broker cannot report a result. Tasks are acknowledged late and
prefetched one at a time, so a worker that dies leaves its task to the broker; the server
also puts back work whose heartbeats stop, whatever the broker does.

Two worker services may grade on one GPU: give each ``GRADERS_SHARE_GPU=1`` (the slot
process inherits it: graders/service/worker.py) and the same ``GRADER_GPU_INDEX``. Their checks
then run side by side and each timing has the GPU alone, through a lock file per GPU in
``GRADERS_GPU_LOCK_DIR`` (default ``/run/graders-gpu-locks``): in containers, mount one
volume there for both services (and only for services that see the GPU under the same
index). Each needs its own ``GRADERS_JOB_UID_BASE`` range and ``WORKER_NAME``, as
workers on different GPUs do, and ``GRADERS_GPU_SLOTS`` (how many share the GPU: each
runner's GPU memory cap is sized from it; ``GRADERS_GPU_MEMORY_CAP_MIB`` sets the cap
instead; graders/service/worker.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import tempfile
import threading
import time

import httpx
from celery import Celery
from celery.signals import worker_ready

from graders.service.task_contract import HEARTBEAT_S, TASK_NAME, task_token
from graders.service.worker_alive import keep_beating
from graders.service.worker_client import GradeOutcome, SlotWorker, write_submission

log = logging.getLogger("graders.service.remote_worker")
FORBIDDEN = ("DATABASE_URL", "ADMIN_TOKEN")  # a worker must not be able to reach either
REPORT_FOR_S = 300.0  # how long a result is retried while the server is away (a restart)


def _refuse_credentials() -> None:
    held = [name for name in FORBIDDEN if os.environ.get(name)]
    if held:
        sys.exit(f"graders.service.remote_worker: refusing to start with {', '.join(held)} in the "
                 "environment; a worker reports through its tasks' credentials alone")


_refuse_credentials()
BROKER_URL = os.environ.get("BROKER_URL", "redis://127.0.0.1:6379/0")
SERVER_URL = os.environ.get("SERVER_URL", "http://127.0.0.1:8000").rstrip("/")
DEVICE = os.environ.get("GRADER_DEVICE", "cuda")
GPU_INDEX = os.environ.get("GRADER_GPU_INDEX")
NAME = os.environ.get("WORKER_NAME") or f"{socket.gethostname()}-{DEVICE}-{GPU_INDEX or 0}"
TIMEOUT_S = float(os.environ.get("GRADER_TIMEOUT_S", "900"))

app = Celery("graders-worker", broker=BROKER_URL)
app.conf.update(
    task_acks_late=True,  # acknowledged when graded: a worker killed mid-grading leaves it
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,  # one task held at a time, the one being graded
    broker_connection_retry_on_startup=True,
    broker_transport_options={"visibility_timeout": 3600},
    worker_hijack_root_logger=False,
)


def _slot_argv() -> list[str]:
    argv = [sys.executable, "-m", "graders", "worker", "--device", DEVICE]
    if os.environ.get("GRADER_WARM"):  # runners kept ready (default: the device's own)
        argv += ["--warm", os.environ["GRADER_WARM"]]
    return argv + (["--gpu-index", GPU_INDEX] if GPU_INDEX is not None else [])


SLOT = SlotWorker(_slot_argv(), TIMEOUT_S)


def _task_secret() -> bytes:
    return os.environ.get("TASK_SECRET", "").encode()


@worker_ready.connect
def _warm(**_) -> None:
    if not _task_secret():
        log.critical("worker=%s cannot report: TASK_SECRET is not set (the server's own; "
                     "it makes each task's credential)", NAME)
        os._exit(3)
    problem = SLOT.warm_up()  # the slot's runners get ready before the first task
    if problem:
        # a worker that cannot grade must not take work (it failed each task in seconds
        # while counting as in service): out, saying why; its orchestrator restarts it
        log.critical("worker=%s out of service: its slot did not start: %s", NAME, problem)
        os._exit(3)
    # the container's healthcheck (graders/service/worker_alive.py): fresh while the slot lives
    keep_beating(lambda: SLOT.proc is not None and SLOT.proc.poll() is None)


class Reporter:
    """Talks to the server about one task, with that task's credential."""

    def __init__(self, task: dict, client: httpx.Client):
        self.sid, self.attempt = int(task["id"]), int(task["attempt"])
        self.client = client
        self.headers = {"X-Task-Token": task_token(_task_secret(), self.sid, self.attempt)}
        self.base = f"{SERVER_URL}/internal/tasks/{self.sid}/{self.attempt}"

    def post(self, what: str, body: dict, patience_s: float) -> int | None:
        """The server's status code, retrying while it is unreachable; None if it stayed away."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                r = self.client.post(f"{self.base}/{what}", json={"worker": NAME, **body},
                                     headers=self.headers, timeout=30)
                if r.status_code < 500:
                    return r.status_code
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                return None
            time.sleep(1.0)


def run_task(task: dict, client: httpx.Client | None = None) -> str:
    """Start, grade, report. Returns what became of it: stored, stale or dropped."""
    client = client or httpx.Client()
    reporter = Reporter(task, client)
    where = f"submission={reporter.sid} attempt={reporter.attempt} worker={NAME}"
    started = reporter.post("start", {}, patience_s=60)
    if started != 200:
        log.info("%s dropped: the server answered %s to its start", where, started)
        return "dropped"
    log.info("%s grading %s (%s)", where, task["exercise"], task["language"])
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            if reporter.post("heartbeat", {}, patience_s=HEARTBEAT_S) == 409:
                return  # the attempt is over; the result will be refused too

    threading.Thread(target=beat, daemon=True, name="heartbeat").start()
    try:
        with tempfile.TemporaryDirectory(prefix="autograder-task-") as tmp:
            path = write_submission(tmp, str(task["language"]), str(task["source"]))
            outcome = SLOT.grade(str(task["exercise"]), path, on_check=lambda check: (
                reporter.post("progress", {"check": check}, patience_s=2)),
                params=task.get("params"))  # the student's values, checked by the grader
        if outcome.slot_healthy:
            # the slot's health travels in the result (the server's view of its workers,
            # /metrics), so here the post waits for the job's runners to be gone and the
            # slot judged: a remote worker's answer is not given ahead of them
            fit, problem = SLOT.settle()
            if not fit:
                outcome = dataclasses.replace(outcome, slot_healthy=False, slot_problem=problem)
    except Exception as exc:  # noqa: BLE001 - a grader fault, retried by the server
        outcome = GradeOutcome(None, f"the worker failed: {exc}")
    finally:
        done.set()
    answer = reporter.post("result", {"result": outcome.result, "fault": outcome.fault,
                                      "slot_healthy": outcome.slot_healthy,
                                      "slot_problem": outcome.slot_problem},
                           patience_s=REPORT_FOR_S)
    verdict = (outcome.result or {}).get("verdict", "no result")
    state = {200: "stored", 409: "stale"}.get(answer, f"unreported ({answer})")
    log.info("%s %s: %s", where, verdict, state)
    if not outcome.slot_healthy:
        # the GPU is not fit to grade: stop taking work, and say why; the unacknowledged
        # task and any later ones go to the other workers
        log.critical("worker=%s out of service: %s", NAME, outcome.slot_problem)
        SLOT.stop()
        os._exit(3)
    return state


@app.task(name=TASK_NAME)
def grade(task: dict) -> str:
    return run_task(task)
