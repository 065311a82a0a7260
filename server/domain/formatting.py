"""Shapes shared by the API modules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import HTTPException, Request

from graders.shared.vocabulary import Verdict

from ..graders_client import ExerciseInfo
from ..models import Role, Submission, User, as_utc

# Verdicts that give no score: a HIP file graded without a GPU is only compiled, nothing
# ran. Its stored 0 is no grade: it never counts on the board or in the CSV, and is shown
# as "not scored here", never as a 0 a student earned.
NOT_SCORED = frozenset({Verdict.COMPILED.value})


def score_of(verdict: str | None, score: float | None) -> float | None:
    """The score as the API gives it: none for a verdict that gives no score."""
    return None if verdict in NOT_SCORED else score


def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with its offset (+00:00): every time the API and the CSV write."""
    if value is None:
        return None
    return as_utc(value).isoformat()


def readable(value: datetime) -> str:
    """A time as the pages write it: UTC, to the minute, said to be UTC."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M UTC")


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
        "status": s.status.value, "verdict": s.verdict,
        "score": score_of(s.verdict, s.score), "late": s.late,
        "flag": s.flag.value, "attempts": s.attempts, "created_at": iso(s.created_at),
        # set when an earlier refused try decided `late` (server/admission.py)
        "first_tried_at": iso(s.first_tried_at),
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
