"""What a student sees while waiting: the queue ahead of them, and each check as it ends.

Checks arrive from the slot's ``graders worker`` (its ``{"id", "check"}`` lines) or from a
remote worker (``/internal/tasks/…/progress``) and live in the server's memory until the
result is stored: progress is a courtesy, the database holds only results.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .models import Status, Submission, as_utc, utcnow


class ProgressBoard:
    def __init__(self) -> None:
        self._checks: dict[int, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def record(self, submission_id: int, check: dict[str, Any]) -> None:
        shown = {"name": str(check.get("name", ""))[:64], "passed": bool(check.get("passed")),
                 "points": check.get("points"), "max_points": check.get("max_points")}
        with self._lock:
            self._checks.setdefault(submission_id, []).append(shown)

    def checks(self, submission_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._checks.get(submission_id, []))

    def clear(self, submission_id: int) -> None:
        with self._lock:
            self._checks.pop(submission_id, None)


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

    board = getattr(request.app.state.dispatcher, "progress", None)
    out: dict[str, Any] = {"queue_position": None, "waiting_s": since(s.created_at),
                           "running_s": None, "checks": [],
                           "checks_total": _checks_total(request, s)}
    if s.status is Status.QUEUED:
        out["queue_position"] = 1 + (db.scalar(select(func.count()).where(
            Submission.status == Status.QUEUED, Submission.id < s.id)) or 0)
    elif s.status is Status.RUNNING:
        out["running_s"] = since(s.started_at)
        out["checks"] = board.checks(s.id) if board else []
    return out


def _checks_total(request, s: Submission) -> int | None:
    """How many checks the submission's exercise runs in its language (for "5 of 8")."""
    exercise = request.app.state.exercises.get(s.exercise)
    if exercise is None:
        return None
    return sum(1 for c in exercise.checks if s.language in c.get("languages", [s.language]))
