"""What a student sees while waiting: the queue ahead of them, and each check as it ends.

Checks arrive from the slot's ``graders worker`` (its ``{"id", "check"}`` lines) or from a
remote worker (``/internal/tasks/…/progress``) and are kept on the submission's row
(``checks_done``) while it runs, so that any server process shows them (issue 27); a claim,
a release and a stored result clear them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from ..core.clock import as_utc, utcnow
from .models import Status, Submission


def shown(check: dict[str, Any]) -> dict[str, Any]:
    """What a page shows of a check: never more than its name and points."""
    return {"name": str(check.get("name", ""))[:64], "passed": bool(check.get("passed")),
            "points": check.get("points"), "max_points": check.get("max_points")}


def add_check(s: Submission, check: dict[str, Any]) -> None:
    """Append a check to a running submission's progress (its row locked by the caller)."""
    s.checks_done = [*(s.checks_done or []), shown(check)]


def record_check(sessions: sessionmaker[Session], submission_id: int, attempt: int,
                 check: dict[str, Any]) -> None:
    """A check of a local grading ended: kept while this attempt still runs."""
    with sessions.begin() as db:
        s = db.get(Submission, submission_id, with_for_update=True)
        if s is not None and s.status is Status.RUNNING and s.attempts == attempt:
            add_check(s, check)


def progress_of(request, db: Session, s: Submission) -> dict[str, Any] | None:
    """For a queued or running submission (else None): its place in the queue (1 = next),
    how long it has waited or run, and the checks done so far, of how many."""
    if s.status not in (Status.QUEUED, Status.RUNNING):
        return None
    now = utcnow()

    def since(value: datetime | None) -> float | None:
        if value is None:
            return None
        return round(max((now - as_utc(value)).total_seconds(), 0.0), 1)

    out: dict[str, Any] = {"queue_position": None, "waiting_s": since(s.created_at),
                           "running_s": None, "checks": [],
                           "checks_total": _checks_total(request, s)}
    if s.status is Status.QUEUED:
        out["queue_position"] = 1 + (db.scalar(select(func.count()).where(
            Submission.status == Status.QUEUED, Submission.id < s.id)) or 0)
    elif s.status is Status.RUNNING:
        out["running_s"] = since(s.started_at)
        out["checks"] = list(s.checks_done or [])
    return out


def _checks_total(request, s: Submission) -> int | None:
    """How many checks the submission's exercise runs in its language (for "5 of 8")."""
    exercise = request.app.state.exercises.get(s.exercise)
    if exercise is None:
        return None
    return sum(1 for c in exercise.checks if s.language in c.get("languages", [s.language]))
