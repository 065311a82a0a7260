"""Dispatching submissions to graders. The database is the queue and the truth.

``Dispatcher`` is the small interface the API talks to; ``LocalPool`` is the
embedded default: one worker thread per slot (one per visible GPU, pinned to
it, else one CPU-interpreter slot), each claiming the oldest queued submission
with a guarded UPDATE, grading it through the slot's ``graders worker`` process
(warm runners between jobs) and storing the result in one transaction. A distributed task engine for many GPU hosts slots
in behind the same interface.

Crash safety: a submission is committed before it is acknowledged; on start,
whatever was left ``running`` by a crash is queued again; a result is stored
only while its submission is still ``running`` under the same attempt, so a
submission ends graded exactly once per grading request.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from .graders_client import GradersClient, GradeOutcome
from .models import Flag, GradeRun, Status, Submission, utcnow
from .settings import Settings

log = logging.getLogger("server.queue")


class Dispatcher(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def notify(self) -> None: ...  # new work was committed


@dataclass
class SlotSpec:
    name: str
    device: str  # cpu | cuda
    gpu_index: int | None
    in_service: bool = True


def default_slots(settings: Settings) -> list[SlotSpec]:
    gpus = sorted(int(m.group(1)) for p in Path("/dev").glob("nvidia*")
                  if (m := re.fullmatch(r"nvidia(\d+)", p.name)))
    if settings.grader_device == "cpu" or (settings.grader_device == "auto" and not gpus):
        count = max(1, settings.grading_slots)
        return [SlotSpec(f"cpu-{i}", "cpu", None) for i in range(count)]
    gpus = gpus or [0]
    if settings.grading_slots:
        gpus = gpus[: settings.grading_slots]
    return [SlotSpec(f"gpu-{i}", "cuda", i) for i in gpus]


def requeue_interrupted(sessions: sessionmaker[Session]) -> int:
    """On start: work a crash left `running` goes back to the queue (a regrade back to
    waiting beside its old grade)."""
    with sessions.begin() as db:
        regrades = db.execute(update(Submission).where(Submission.status == Status.RUNNING,
                                                       Submission.regrade_pending)
                              .values(status=Status.GRADED, started_at=None)).rowcount or 0
        new = db.execute(update(Submission).where(Submission.status == Status.RUNNING)
                         .values(status=Status.QUEUED, started_at=None)).rowcount or 0
        return regrades + new


def queue_depth(db: Session) -> int:
    return db.scalar(select(func.count()).where(Submission.status == Status.QUEUED)) or 0


class LocalPool:
    def __init__(self, sessions: sessionmaker[Session], client: GradersClient, settings: Settings,
                 slots: list[SlotSpec] | None = None):
        self.sessions = sessions
        self.client = client
        self.settings = settings
        self.slots = slots or default_slots(settings)
        self._wake = threading.Condition()
        self._turn_lock = threading.Lock()
        self._regrade_turn = False  # whose turn it is when both kinds of work wait
        self._stopping = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        n = requeue_interrupted(self.sessions)
        if n:
            log.warning("requeued %d submissions left running by a previous process", n)
        for slot in self.slots:
            thread = threading.Thread(target=self._work, args=(slot,), name=f"slot-{slot.name}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self.client.close()

    def notify(self) -> None:
        with self._wake:
            self._wake.notify_all()

    # -- a slot's loop ----------------------------------------------------------------
    def _work(self, slot: SlotSpec) -> None:
        self.client.warm_up(slot.device, slot.gpu_index)
        while not self._stopping and slot.in_service:
            try:
                claimed = self._claim()
            except Exception:  # noqa: BLE001 - a database hiccup must not kill the slot
                log.exception("claiming work failed")
                claimed = None
            if claimed is None:
                with self._wake:
                    if not self._stopping:
                        self._wake.wait(timeout=2.0)
                continue
            submission_id, attempt, exercise, language, source = claimed
            outcome = self.client.grade(exercise, language, source, slot.device, slot.gpu_index)
            try:
                self._store(submission_id, attempt, outcome)
            except Exception:  # noqa: BLE001
                log.exception("storing the result of submission %d failed", submission_id)
            if not outcome.slot_healthy:
                slot.in_service = False
                log.error("slot %s taken out of service: %s", slot.name, outcome.slot_problem)

    def _claim(self) -> tuple[int, int, str, str, str] | None:
        """The next job: students' new work and instructors' regrades take turns, so a
        "regrade all" neither waits for the queue to empty nor holds students up."""
        with self._turn_lock:
            kinds = ["regrade", "new"] if self._regrade_turn else ["new", "regrade"]
            for kind in kinds:
                claimed = self._claim_kind(kind)
                if claimed is not None:
                    self._regrade_turn = kind == "new"
                    return claimed
        return None

    def _claim_kind(self, kind: str) -> tuple[int, int, str, str, str] | None:
        waiting = (Submission.status == Status.QUEUED) if kind == "new" else \
            ((Submission.status == Status.GRADED) & Submission.regrade_pending)
        with self.sessions.begin() as db:
            for sid in db.scalars(select(Submission.id).where(waiting)
                                  .order_by(Submission.id).limit(5)):
                result = db.execute(
                    update(Submission)
                    .where(Submission.id == sid, waiting)
                    .values(status=Status.RUNNING, started_at=utcnow(),
                            attempts=Submission.attempts + 1))
                if result.rowcount == 1:
                    s = db.get(Submission, sid)
                    db.refresh(s)
                    return s.id, s.attempts, s.exercise, s.language, s.source
        return None

    def _store(self, submission_id: int, attempt: int, outcome: GradeOutcome) -> None:
        result = outcome.result
        grader_fault = result is None or result.get("verdict") == "grader_error"
        with self.sessions.begin() as db:
            s = db.get(Submission, submission_id, with_for_update=True)
            if s is None or s.status is not Status.RUNNING or s.attempts != attempt:
                log.warning("submission %d changed while it was graded; result dropped",
                            submission_id)
                return
            if grader_fault:
                reason = outcome.fault or (result or {}).get("message", "")
                log.error("grader fault on submission %d (attempt %d): %s", s.id, attempt, reason)
                if s.attempts < self.settings.max_grader_attempts:
                    # back to waiting: a regrade beside its old grade, new work in the queue
                    s.status = Status.GRADED if s.regrade_pending else Status.QUEUED
                    s.started_at = None
                    self.notify()
                    return
                if s.regrade_pending:  # the old grade stands; the instructor reads the log
                    s.status, s.regrade_pending = Status.GRADED, False
                    return
                s.status = Status.ERROR
                result = result or {"verdict": "grader_error", "score": 0.0, "message": reason,
                                    "checks": [], "performance": None, "grader_version": ""}
            else:
                s.status, s.regrade_pending = Status.GRADED, False
                if result.get("flag"):  # e.g. a timing faster than a copy: an instructor looks
                    s.flag = Flag.SUSPICIOUS
                    log.warning("submission %d flagged: %s", s.id, result["flag"])
            s.verdict, s.score, s.finished_at = result["verdict"], float(result["score"]), utcnow()
            db.add(GradeRun(submission_id=s.id, verdict=s.verdict, score=s.score, result=result,
                            grader_version=str(result.get("grader_version", ""))))
