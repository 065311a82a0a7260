"""Grading on remote workers through Celery and a Redis broker (``DISPATCHER=celery``).

The database stays the truth and the broker is only a way to reach a worker:

- **An outbox.** A committed submission waits as ``queued``. The publisher claims it
  (``running``, attempt + 1, ``dispatched_at``) and then publishes the task; if the broker
  is down the claim is undone and the submission waits, to be published when the broker
  is back. At most ``publish_window`` jobs are published and not yet started, so a broker
  that dies with its messages loses only those.
- **Leases.** A worker says when it starts a task and then every few seconds
  (server/api/internal.py). A job published and never started within
  ``publish_timeout_s``, or started and silent for ``heartbeat_timeout_s``, is put back and
  published again under a new attempt by the reaper (server/grading/reaper.py); a late
  answer for the old attempt is refused.
- **Its own connections.** Claims, leases and the workers' reports go through a small pool
  of the dispatcher's own (server/grading/grading_db.py), never behind students' requests;
  a report the database cannot take now is answered 503 and the worker sends it again.
- **Exactly once.** Results are stored only for the running attempt (server/grading/jobs.py).
- **Bounded retries.** A started job whose worker falls silent counts a lost lease; the
  ``MAX_GRADER_ATTEMPTS``-th ends it as ``error`` (a submission that kills its worker).
- **Several server processes** may run this publisher against one database: a claim is a
  guarded UPDATE, so each job is published by one of them; the workers' last words are kept
  in the database (``workers_seen``), so that every process counts them alike.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any, Mapping

from celery import Celery
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from graders.service.task_contract import TASK_NAME, queue_for

from ..core.clock import utcnow
from ..core.settings import Settings
from ..domain.models import Status, Submission, WorkerSeen
from ..domain.student_params import params_for
from . import grading_db
from .jobs import Claimer, Job, release
from .reaper import Reaper
from .task_tokens import load_secret

log = logging.getLogger("server.celery")
WORKER_SEEN_S = 60.0  # a worker heard from within this is counted as in service
WORKER_WRITE_S = 5.0  # a worker's last word is written at most this often (per process)


def make_celery(broker_url: str) -> Celery:
    app = Celery("autograder", broker=broker_url)
    app.conf.update(
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=3,
        # the outbox retries; a publish must not hang the publisher while the broker is down
        task_publish_retry=False,
        broker_transport_options={"socket_connect_timeout": 3, "socket_timeout": 5},
    )
    return app


class CeleryDispatcher:
    """Publishes claimed jobs to workers; puts back what the workers lost."""

    def __init__(self, sessions: sessionmaker[Session], settings: Settings,
                 celery: Celery | None = None, exercises: Mapping[str, Any] | None = None):
        self.sessions, self.settings = sessions, settings
        self.exercises = exercises or {}  # their parameter declarations, for each student's
        self.celery = celery or make_celery(settings.broker_url)
        if not settings.task_secret:  # the workers make their reports' credentials with it
            raise ValueError("DISPATCHER=celery needs TASK_SECRET, the same on the server "
                             "and on every worker (docs/deploy.md)")
        self.secret = load_secret(settings)
        # claims, leases and the workers' reports (server/api/internal.py): apart from the
        # requests' pool. Two kept, more opened while many workers report at once
        self.grading = grading_db.grading_sessions(sessions, settings, 2)
        self.claimer = Claimer(self.grading)
        self.queue = queue_for(settings.grader_queue)
        self._wake = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        # puts back what the workers or the broker lost; no outbox here: a worker keeps its
        # result until the server has stored it (graders/service/remote_worker.py)
        self.reaper = Reaper(self.grading, settings, on_put_back=self.notify)
        self._written: dict[str, tuple[float, bool]] = {}  # worker -> (when, healthy) written
        self.broker_up = True

    # -- Dispatcher ---------------------------------------------------------------------
    def start(self) -> None:
        self.reaper.start()
        self._thread = threading.Thread(target=self._run, name="celery-publisher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread:
            self._thread.join(timeout=10)
        self.reaper.stop()
        grading_db.close(self.grading, self.sessions)

    def notify(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def readiness(self) -> None:
        """None: the gradings run on remote workers, each ready on its own (a queued task
        waits for one); this server is ready once it answers."""
        return None

    def heard_from(self, worker: str, started: bool = False, healthy: bool = True) -> None:
        """After a worker's report was stored: a failure here must not turn its answer into
        an error (a worker sends a result again on a 5xx, and then finds it stored)."""
        if worker:
            try:
                self._remember(worker, healthy)
            except Exception:  # noqa: BLE001 - only /metrics' count of workers waits
                log.warning("worker %s's last word was not written", worker[:128], exc_info=True)
        if started:
            self.notify()  # a place in the publish window is free

    def _remember(self, worker: str, healthy: bool) -> None:
        """The worker's last word, in the database: any server process may have heard it.
        Written when its health changed, or at most every WORKER_WRITE_S (heartbeats come
        every few seconds from every worker)."""
        now = time.monotonic()
        last = self._written.get(worker)
        if last is not None and last[1] == healthy and now - last[0] < WORKER_WRITE_S:
            return
        self._written[worker] = (now, healthy)
        with self.grading.begin() as db:
            seen = db.get(WorkerSeen, worker[:128])
            if seen is None:
                db.add(WorkerSeen(name=worker[:128], last_seen=utcnow(), healthy=healthy))
            else:
                seen.last_seen, seen.healthy = utcnow(), healthy

    def workers(self) -> tuple[int, int]:
        """(in service, out of service): workers heard from in the last minute, by any
        server process, as their last word said."""
        since = utcnow() - timedelta(seconds=WORKER_SEEN_S)
        with self.sessions() as db:
            rows = dict(db.execute(select(WorkerSeen.healthy, func.count())
                                   .where(WorkerSeen.last_seen > since)
                                   .group_by(WorkerSeen.healthy)).all())
        return rows.get(True, 0), rows.get(False, 0)

    # -- the publisher ------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping:
            try:
                published = self._publish_some()
            except Exception:  # noqa: BLE001 - a database or broker hiccup must not stop it
                log.exception("the publisher failed a round")
                published = 0
            with self._wake:
                if not self._stopping and not published:
                    self._wake.wait(timeout=1.0 if self.broker_up else 2.0)

    def _unstarted(self) -> int:
        with self.grading() as db:
            return db.scalar(select(func.count()).where(
                Submission.status == Status.RUNNING, Submission.dispatched_at.isnot(None),
                Submission.heartbeat_at.is_(None))) or 0

    def _publish_some(self) -> int:
        published = 0
        room = self.settings.publish_window - self._unstarted()
        while room > 0 and not self._stopping:
            job = self.claimer.claim(dispatched_at=utcnow(), heartbeat_at=None, started_at=None)
            if job is None:
                break
            if not self._publish(job):
                break
            published += 1
            room -= 1
        return published

    def _publish(self, job: Job) -> bool:
        task = {"id": job.id, "attempt": job.attempt, "exercise": job.exercise,
                "language": job.language, "source": job.source,
                "params": params_for(self.settings, self.exercises, job.exercise, job.username)}
        # no credential in the message: the worker makes it from TASK_SECRET (task_tokens.py)
        try:
            self.celery.send_task(TASK_NAME, args=[task], queue=self.queue,
                                  task_id=f"submission-{job.id}-attempt-{job.attempt}")
        except Exception as exc:  # noqa: BLE001 - kombu raises several kinds when it is down
            with self.grading.begin() as db:  # the outbox keeps it: back to waiting
                release(db, (Submission.id == job.id) & (Submission.attempts == job.attempt))
            if self.broker_up:
                log.error("the broker is unreachable (%s); submissions wait as queued", exc)
            self.broker_up = False
            return False
        if not self.broker_up:
            log.warning("the broker is back; publishing the queue")
        self.broker_up = True
        log.info("submission=%d attempt=%d published to queue %s", job.id, job.attempt,
                 self.queue)
        return True
