"""Shapes shared by the API modules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import HTTPException, Request

from ..graders_client import ExerciseInfo
from ..models import Role, Submission, User, as_utc


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return as_utc(value).isoformat()


def own_submission(db, user: User, submission_id: int) -> Submission:
    """The submission if it is the user's own, or the user teaches; else 404 (never 403:
    whether another student's submission exists is not the asker's to learn)."""
    s = db.get(Submission, submission_id)
    if s is None or (s.user_id != user.id and user.role is not Role.INSTRUCTOR):
        raise HTTPException(404, f"no submission {submission_id} of yours")
    return s


def exercise_or_error(request: Request, name: str, status: int = 404) -> ExerciseInfo:
    exercises = request.app.state.exercises
    if name not in exercises:
        raise HTTPException(status, f"unknown exercise {name!r} (known: {', '.join(exercises)})")
    return exercises[name]


def submission_json(request: Request, s: Submission, with_result: bool = True) -> dict[str, Any]:
    out = {
        "id": s.id, "exercise": s.exercise, "language": s.language, "filename": s.filename,
        "status": s.status.value, "verdict": s.verdict, "score": s.score, "late": s.late,
        "flag": s.flag.value, "attempts": s.attempts, "created_at": iso(s.created_at),
        "started_at": iso(s.started_at), "finished_at": iso(s.finished_at),
        "regrading": bool(s.regrade_pending),
        "url": submission_url(request, s.id),
    }
    if with_result:
        out["result"] = s.results[-1].result if s.results else None
    return out


def submission_url(request: Request, submission_id: int) -> str:
    """PUBLIC_URL + the path, or the path alone: never built from the client's Host header."""
    path = request.app.url_path_for("get_submission", submission_id=submission_id)
    public = request.app.state.settings.public_url.rstrip("/")
    return f"{public}{path}" if public else str(path)
