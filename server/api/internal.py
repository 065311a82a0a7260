"""Where remote workers report: start, heartbeat and result of one task each.

Every call names its task (submission, attempt) and carries that task's credential
(server/grading/task_tokens.py) in ``X-Task-Token``; nothing else is accepted from a worker. A
call for an attempt that is over (graded, put back, given to another worker) answers
409, and the worker drops the task.

A worker's report goes through the dispatcher's own connections (server/grading/grading_db.py),
never behind students' requests. A result is answered 2xx only once it is stored; when the
database cannot take it now (locked, down, every connection in use) the answer is 503 with
Retry-After, never a 4xx: the worker keeps the result and sends it again on any 5xx
(graders/service/remote_worker.py, for REPORT_FOR_S), and drops it on a 4xx.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Iterator

from fastapi import APIRouter, Header, HTTPException, Request
from pydantic import BaseModel, Field

from graders.shared.vocabulary import Verdict

from ..core.clock import utcnow
from ..domain.models import Status, Submission
from ..domain.progress import add_check
from ..grading.graders_client import GradeOutcome
from ..grading.jobs import database_away, store
from ..grading.task_tokens import valid

log = logging.getLogger("server.internal")
router = APIRouter(prefix="/internal/tasks", include_in_schema=False)
VERDICTS = {v.value for v in Verdict}


class WorkerNote(BaseModel):
    worker: str = Field("", max_length=128)


class TaskResult(WorkerNote):
    result: dict[str, Any] | None = None  # the grader's JSON (graders/engine/results.py)
    fault: str = Field("", max_length=4000)  # why there is none: a grader fault, retried
    slot_healthy: bool = True
    slot_problem: str = Field("", max_length=4000)


def _dispatcher(request: Request):
    return request.app.state.dispatcher


def _check(request: Request, submission_id: int, attempt: int, token: str | None) -> None:
    secret = getattr(_dispatcher(request), "secret", None)
    if secret is None:
        raise HTTPException(404, "this server grades locally; it takes no remote results")
    if not valid(secret, submission_id, attempt, token or ""):
        raise HTTPException(403, "this task credential is not valid for this task")


def _sessions(request: Request):
    """The dispatcher's own connections (the requests' for one that has none)."""
    return getattr(_dispatcher(request), "grading", None) or request.app.state.sessionmaker


@contextmanager
def _database_or_503() -> Iterator[None]:
    """The database away: 503, so that the worker sends the report again."""
    try:
        yield
    except Exception as exc:
        if not database_away(exc):
            raise
        log.warning("a worker's report waits: the database cannot take it now (%s)",
                    str(exc).splitlines()[0][:200])
        raise HTTPException(503, "the database cannot take this now: send it again",
                            headers={"Retry-After": "2"}) from exc


def _running(db, submission_id: int, attempt: int) -> Submission:
    s = db.get(Submission, submission_id, with_for_update=True)
    if s is None or s.status is not Status.RUNNING or s.attempts != attempt:
        raise HTTPException(409, "this attempt is over (graded, or put back and given "
                                 "to another worker): drop the task")
    return s


@router.post("/{submission_id}/{attempt}/start")
def start(submission_id: int, attempt: int, note: WorkerNote, request: Request,
          x_task_token: str | None = Header(None)):
    """A worker took the task from the broker and begins grading it."""
    _check(request, submission_id, attempt, x_task_token)
    with _database_or_503(), _sessions(request).begin() as db:
        s = _running(db, submission_id, attempt)
        if s.heartbeat_at is not None:
            raise HTTPException(409, "another worker already started this attempt")
        s.started_at = s.heartbeat_at = utcnow()
        s.worker, s.checks_done = note.worker or None, None
    _dispatcher(request).heard_from(note.worker, started=True)
    return {"ok": True}


def _beat(request: Request, submission_id: int, attempt: int, token: str | None,
          worker: str, check: dict[str, Any] | None = None) -> None:
    """The task's worker is alive: its lease runs on (and a check ended, if ``check``)."""
    _check(request, submission_id, attempt, token)
    with _database_or_503(), _sessions(request).begin() as db:
        s = _running(db, submission_id, attempt)
        s.heartbeat_at = utcnow()
        if check is not None:  # kept on the row: any server process shows it (progress.py)
            add_check(s, check)
    _dispatcher(request).heard_from(worker)


@router.post("/{submission_id}/{attempt}/heartbeat")
def heartbeat(submission_id: int, attempt: int, note: WorkerNote, request: Request,
              x_task_token: str | None = Header(None)):
    _beat(request, submission_id, attempt, x_task_token, note.worker)
    return {"ok": True}


class TaskProgress(WorkerNote):
    check: dict[str, Any]


@router.post("/{submission_id}/{attempt}/progress")
def progress(submission_id: int, attempt: int, body: TaskProgress, request: Request,
             x_task_token: str | None = Header(None)):
    """A check of the task ended (for the student's page; also a heartbeat)."""
    _beat(request, submission_id, attempt, x_task_token, body.worker, body.check)
    return {"ok": True}


@router.post("/{submission_id}/{attempt}/result")
def result(submission_id: int, attempt: int, body: TaskResult, request: Request,
           x_task_token: str | None = Header(None)):
    """The grading's outcome, stored once for this attempt; acknowledged only once stored."""
    _check(request, submission_id, attempt, x_task_token)
    outcome = body.result
    if outcome is not None and not (outcome.get("verdict") in VERDICTS and
                                    isinstance(outcome.get("score"), (int, float))):
        raise HTTPException(422, "a result needs a known verdict and a numeric score")
    dispatcher = _dispatcher(request)
    with _database_or_503():
        stored = store(_sessions(request), request.app.state.settings, submission_id, attempt,
                       GradeOutcome(outcome, body.fault, body.slot_healthy, body.slot_problem),
                       dispatcher.notify, request.app.state.exercises)
    dispatcher.heard_from(body.worker, healthy=body.slot_healthy)
    if stored == "stale":
        raise HTTPException(409, "this attempt is over: its result was not stored")
    return {"stored": stored}
