"""Shapes shared by the API modules."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from fastapi import HTTPException, Request

from ..graders_client import ExerciseInfo
from ..models import Submission


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite returns naive datetimes; they are UTC
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


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
