"""A submission's life as a grading job, the same whoever grades it.

Claimed from the database (students' new work and instructors' regrades take turns),
its lease renewed while it is graded (``beat``), its result stored exactly once per attempt,
and put back when nobody renewed its lease (``requeue_stale``). The local pool
(server/grading/local_pool.py) and the Celery dispatcher (server/grading/celery_dispatch.py)
differ only in who runs the grader and who renews the lease.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping

from sqlalchemy import ColumnElement, and_, false, func, or_, select, update
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker

from ..core import metrics
from ..core.clock import as_utc, utcnow
from ..core.settings import Settings
from ..domain.models import Flag, GradeRun, Status, Submission
from ..domain.student_params import params_for
from .graders_client import GradeOutcome

log = logging.getLogger("server.jobs")


@dataclass(frozen=True)
class Job:
    id: int
    attempt: int  # the credential of this grading: a result for another attempt is stale
    exercise: str
    language: str
    source: str
    username: str = ""  # whose work: their exercise parameters go with it (student_params)
    # other jobs waiting when this one was claimed (counted up to WAITING_COUNTED): the
    # local pool tells a slot how many gradings its host is about to run (local_pool.py)
    waiting: int = 0


# a host runs a handful of slots: counting the queue beyond this tells a slot nothing more
WAITING_COUNTED = 64


def _waiting(kind: str) -> ColumnElement[bool]:
    if kind == "new":
        return Submission.status == Status.QUEUED
    return (Submission.status == Status.GRADED) & Submission.regrade_pending


class Claimer:
    """Hands out the next job. New work and regrades take turns, so a "regrade all"
    neither waits for the queue to empty nor holds students up."""

    def __init__(self, sessions: sessionmaker[Session]):
        self.sessions = sessions
        self._lock = threading.Lock()
        self._regrade_turn = False  # whose turn it is when both kinds of work wait

    def claim(self, count_waiting: bool = False, **values: Any) -> Job | None:
        """Mark the next job running (attempt + 1, plus ``values``) and return it;
        ``count_waiting``: with the jobs still waiting counted (``Job.waiting``)."""
        with self._lock:
            kinds = ["regrade", "new"] if self._regrade_turn else ["new", "regrade"]
            for kind in kinds:
                job = self._claim_kind(kind, values, count_waiting)
                if job is not None:
                    self._regrade_turn = kind == "new"
                    return job
        return None

    def _claim_kind(self, kind: str, values: dict[str, Any],
                    count_waiting: bool) -> Job | None:
        waiting = _waiting(kind)
        with self.sessions.begin() as db:
            for sid in db.scalars(select(Submission.id).where(waiting)
                                  .order_by(Submission.id).limit(5)):
                # board_neutral: waiting work is on no board, a regrade stays on its own
                # grade's place while it runs (submissions.on_the_board): no board changes
                result = db.execute(
                    update(Submission).where(Submission.id == sid, waiting)
                    .values(status=Status.RUNNING, attempts=Submission.attempts + 1,
                            checks_done=None, **values)
                    .execution_options(board_neutral=True))
                if result.rowcount == 1:
                    s = db.get(Submission, sid)
                    db.refresh(s)
                    return Job(s.id, s.attempts, s.exercise, s.language, s.source,
                               s.user.username,
                               waiting=_count_waiting(db) if count_waiting else 0)
        return None


def _count_waiting(db: Session) -> int:
    """Jobs of either kind waiting now, up to WAITING_COUNTED (the count stops there)."""
    either = or_(_waiting("new"), _waiting("regrade"))
    some = select(Submission.id).where(either).limit(WAITING_COUNTED).subquery()
    return db.scalar(select(func.count()).select_from(some)) or 0


def release(db: Session, where: ColumnElement[bool]) -> int:
    """Running work back to waiting: new work to the queue, a regrade beside its old
    grade. Its attempt is over: a result still on its way for it is refused."""
    cleared = dict(started_at=None, dispatched_at=None, heartbeat_at=None, worker=None,
                   checks_done=None)
    running = Submission.status == Status.RUNNING
    # board_neutral: a running regrade and its old grade are on the board alike, and new
    # work is on none, running or waiting (server/domain/board_cache.py)
    regrades = db.execute(update(Submission).where(running, Submission.regrade_pending, where)
                          .values(status=Status.GRADED, **cleared)
                          .execution_options(board_neutral=True)).rowcount or 0
    new = db.execute(update(Submission).where(running, where)
                     .values(status=Status.QUEUED, **cleared)
                     .execution_options(board_neutral=True)).rowcount or 0
    return regrades + new


def database_away(exc: BaseException) -> bool:
    """The database cannot take this now (locked, down, every connection in use), as
    opposed to refusing it for good: whoever holds the write tries again later."""
    if isinstance(exc, (OperationalError, InterfaceError, PoolTimeout)):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def beat(sessions: sessionmaker[Session], jobs: list[tuple[int, int]]) -> None:
    """Renew the leases of ``jobs`` ((submission, attempt), being graded here). Always one
    write, also for no job: a beat that went through says this process can write, which
    the reaper needs to know before it judges anyone else's lease (server/grading/reaper.py)."""
    held = [and_(Submission.id == sid, Submission.attempts == attempt) for sid, attempt in jobs]
    with sessions.begin() as db:
        # neutral: a lease is on no board and in no progress stream
        db.execute(update(Submission)
                   .where(Submission.status == Status.RUNNING, or_(false(), *held))
                   .values(heartbeat_at=utcnow())
                   .execution_options(board_neutral=True, progress_neutral=True))


@dataclass(frozen=True)
class PutBack:
    """What ``requeue_stale`` did: published jobs the broker lost, started ones whose
    worker fell silent (put back), and those that lost their worker too often (ended)."""

    unstarted: list[int]
    silent: list[int]
    ended: list[int]

    @property
    def ids(self) -> list[int]:
        return self.unstarted + self.silent


def requeue_stale(sessions: sessionmaker[Session], published_before: datetime | None,
                  heard_before: datetime | None, max_leases: int,
                  gone: list[tuple[int, int]] | None = None) -> PutBack:
    """Work whose grader vanished: published but never started by ``published_before``
    (the broker lost it: not the submission's doing, put back), or started but its lease
    not renewed since ``heard_before`` (its worker, its slot or its whole server process
    died, or the submission killed it), or held by a process known to be ``gone``
    ((submission, attempt): server/grading/holders.py): counted, put back, and ended as
    ``error`` on the ``max_leases``-th time, so that a submission that kills every grader it
    reaches does not go round for ever. A row running with no lease at all (neither
    published nor renewed: left by a server older than leases for local slots) is put back
    too. A threshold of None judges nothing by it."""
    running = Submission.status == Status.RUNNING
    lost = or_(false(), *[and_(Submission.id == sid, Submission.attempts == attempt)
                          for sid, attempt in gone or []])
    with sessions.begin() as db:
        unstarted = [] if published_before is None else list(db.scalars(
            select(Submission.id).where(running, Submission.heartbeat_at.is_(None),
                                        Submission.dispatched_at.is_(None)
                                        | (Submission.dispatched_at < published_before))))
        silent = list(db.scalars(select(Submission.id).where(
            running, lost if heard_before is None
            else or_(lost, Submission.heartbeat_at < heard_before))))
        ended, observed, held = [], [], set(gone or [])
        for sid in list(silent):
            s = db.get(Submission, sid, with_for_update=True)
            # looked at again under its lock: stored, or renewed, since the query above
            if s.status is not Status.RUNNING or not (
                    (s.id, s.attempts) in held or (heard_before is not None and s.heartbeat_at
                                                   and as_utc(s.heartbeat_at) < heard_before)):
                silent.remove(sid)
                continue
            s.leases_lost = (s.leases_lost or 0) + 1
            if s.leases_lost >= max_leases:
                ended.append(sid)
                observed.append(end_in_error(
                    db, s, f"its grading lost its worker {s.leases_lost} times (the worker "
                           "died or stopped answering while grading it): it was not graded, "
                           "and does not count against you; an instructor can grade it again"))
        put = PutBack(unstarted, [sid for sid in silent if sid not in ended], ended)
        if put.ids:
            release(db, Submission.id.in_(put.ids))
    _observe(observed)  # counted once committed: a transaction that failed counts nothing
    metrics.REQUEUES.labels("broker_lost").inc(len(put.unstarted))
    metrics.REQUEUES.labels("lease_lost").inc(len(put.silent))
    metrics.ENDED_LOST.inc(len(put.ended))
    return put


Observed = tuple[Any, ...]  # metrics.observe's arguments, for once the transaction has committed


def _observe(observed: list[Observed | None]) -> None:
    for args in observed:
        if args is not None:
            metrics.observe(*args)


def end_in_error(db: Session, s: Submission, reason: str,
                 result: dict[str, Any] | None = None) -> Observed | None:
    """A submission the graders could not grade: `error` (on no board, not counted against
    the student), with why; a regrade's old grade stands instead. Returns what /metrics is
    to count once the caller's transaction has committed."""
    if s.regrade_pending:  # the old grade stands; the instructor reads the log
        s.status, s.regrade_pending = Status.GRADED, False
        return None
    result = result or {"verdict": "grader_error", "score": 0.0, "message": reason,
                        "checks": [], "performance": None, "grader_version": ""}
    s.status, s.checks_done = Status.ERROR, None
    return _keep(db, s, result, waited_from=s.created_at)


def _keep(db: Session, s: Submission, result: dict[str, Any], waited_from) -> Observed:
    """The result's headline on the submission and the result itself as a grading run;
    returns its times for /metrics (``waited_from``: when the wait that ends here began, if
    a student's), counted by the caller once committed: a store that failed and is tried
    again must not count twice."""
    s.verdict, s.score, s.finished_at = result["verdict"], float(result["score"]), utcnow()
    db.add(GradeRun(submission_id=s.id, verdict=s.verdict, score=s.score, result=result,
                    grader_version=str(result.get("grader_version", ""))))
    return (result, s.started_at, s.finished_at, waited_from)


def store(sessions: sessionmaker[Session], settings: Settings, job_id: int, attempt: int,
          outcome: GradeOutcome, on_requeue: Callable[[], None] = lambda: None,
          exercises: Mapping[str, Any] | None = None) -> str:
    """Store a grading's outcome once: "stored", "retry" (a grader fault, back to waiting)
    or "stale" (the submission moved on: another attempt, or already graded). Raises when
    the database cannot take it (``database_away``): nothing was stored, try again.
    ``exercises``: a result must say it was graded with the student's own exercise
    parameters (a worker that dropped them judged the student against other numbers)."""
    result = outcome.result
    grader_fault = result is None or result.get("verdict") == "grader_error"
    with sessions.begin() as db:
        s = db.get(Submission, job_id, with_for_update=True)
        if s is None or s.status is not Status.RUNNING or s.attempts != attempt:
            log.warning("submission %d changed while it was graded; result dropped", job_id)
            return "stale"
        wrong_params = ""
        if exercises is not None and not grader_fault:
            own = params_for(settings, exercises, s.exercise, s.user.username)
            if result.get("params", {}) != own:
                grader_fault = True
                wrong_params = (f"graded with parameters {result.get('params')!r}, not the "
                                f"student's {own!r}")
                result = None  # its verdict is about other numbers: not the student's
        answer, observed = "stored", None
        if grader_fault:
            reason = wrong_params or outcome.fault or (result or {}).get("message", "")
            log.error("grader fault on submission %d (attempt %d): %s", s.id, attempt, reason)
            if s.attempts < settings.max_grader_attempts:
                release(db, Submission.id == s.id)
                answer = "retry"
            else:
                observed = end_in_error(db, s, reason, result)
        else:
            regrade = s.regrade_pending
            s.status, s.regrade_pending, s.checks_done = Status.GRADED, False, None
            if result.get("flag"):  # e.g. a timing faster than a copy: an instructor looks
                s.flag = Flag.SUSPICIOUS
                log.warning("submission %d flagged: %s", s.id, result["flag"])
            # a regrade's wait is the instructor's, not a student's
            observed = _keep(db, s, result, waited_from=None if regrade else s.created_at)
    # committed: only now counted, and only now the slots woken for the work put back
    _observe([observed])
    if answer == "retry":
        metrics.REQUEUES.labels("grader_fault").inc()
        on_requeue()
    return answer
