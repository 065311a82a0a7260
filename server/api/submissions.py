"""Submitting and reading submissions."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import PurePath

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..auth import current_user, get_db
from ..graders_client import LANGUAGE_BY_SUFFIX
from ..models import Role, Status, Submission, User
from ..queue import queue_depth
from .common import exercise_or_error, submission_json

router = APIRouter(prefix="/api/submissions", tags=["submissions"])
IN_FLIGHT = (Status.QUEUED, Status.RUNNING)


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


async def _read_body(request: Request) -> tuple[str, str | None, str, str | bytes]:
    """(exercise, language or None, filename, source) from multipart or JSON."""
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("multipart/form-data"):
        form = await request.form()
        exercise, upload = form.get("exercise"), form.get("file")
        if not isinstance(exercise, str) or upload is None or isinstance(upload, str):
            raise HTTPException(422, "multipart needs fields `exercise` and `file` (the source file)")
        language = form.get("language") if isinstance(form.get("language"), str) else None
        filename = PurePath(upload.filename or "submission").name
        return exercise, language or None, filename, await upload.read()
    if ctype.startswith("application/json"):
        try:
            body = await request.json()
        except ValueError:
            raise HTTPException(422, "the body is not valid JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("exercise"), str) \
                or not isinstance(body.get("source"), str):
            raise HTTPException(422, 'JSON needs {"exercise": ..., "language": ..., "source": ...}')
        language = body.get("language") if isinstance(body.get("language"), str) else None
        return body["exercise"], language, str(body.get("filename") or "submission"), body["source"]
    raise HTTPException(415, "send multipart/form-data (exercise, file) or JSON "
                             '{"exercise", "language", "source"}')


def _retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


@router.post("", status_code=202)
async def create_submission(request: Request, user: User = Depends(current_user),
                            db: Session = Depends(get_db)):
    settings = request.app.state.settings
    exercise_name, language, filename, raw = await _read_body(request)
    exercise = exercise_or_error(request, exercise_name, status=422)

    if language is None:
        language = LANGUAGE_BY_SUFFIX.get(PurePath(filename).suffix.lower())
        if language is None:
            raise HTTPException(422, f"cannot tell the language of {filename!r}: name it .py "
                                     "(Triton) or .cpp/.hip (HIP), or send `language`")
    if language not in exercise.languages:
        raise HTTPException(422, f"{exercise.name} accepts {', '.join(exercise.languages)}, "
                                 f"not {language!r}")
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) > settings.max_source_bytes:
        raise HTTPException(413, f"the source is {len(data)} bytes; the limit is "
                                 f"{settings.max_source_bytes} bytes")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(422, f"the source is not UTF-8 text (byte {exc.start})") from None
    if not source.strip():
        raise HTTPException(422, "the source is empty")

    now = datetime.now(timezone.utc)
    if user.role is Role.STUDENT:
        mine = select(Submission).where(Submission.user_id == user.id)
        in_flight = db.scalar(select(func.count()).select_from(
            mine.where(Submission.status.in_(IN_FLIGHT)).subquery()))
        if in_flight >= settings.max_in_flight_per_student:
            raise HTTPException(429, "you already have a submission being graded: wait for it",
                                headers=_retry_after(10))
        recent = db.scalars(mine.where(Submission.created_at > now - timedelta(hours=1))
                            .order_by(Submission.created_at)).all()
        if len(recent) >= settings.submissions_per_hour:
            wait = (_as_utc(recent[0].created_at) + timedelta(hours=1) - now).total_seconds()
            raise HTTPException(429, f"at most {settings.submissions_per_hour} submissions an hour",
                                headers=_retry_after(wait))
    if queue_depth(db) >= settings.max_queue_depth:
        raise HTTPException(503, "the grading queue is full: try again shortly",
                            headers=_retry_after(30))

    deadline = settings.deadlines.get(exercise.name) or (
        datetime.fromisoformat(exercise.deadline) if exercise.deadline else None)
    submission = Submission(user_id=user.id, exercise=exercise.name, language=language,
                            filename=filename[:128], source=source, status=Status.QUEUED,
                            attempts=0, late=bool(deadline and now > _as_utc(deadline)),
                            created_at=now)
    db.add(submission)
    db.commit()  # stored before it is acknowledged
    request.app.state.dispatcher.notify()
    return JSONResponse(status_code=202, content={
        "id": submission.id, "status": submission.status.value,
        "url": str(request.url_for("get_submission", submission_id=submission.id)),
        "late": submission.late})


@router.get("")
def my_submissions(request: Request, exercise: str | None = None,
                   user: User = Depends(current_user), db: Session = Depends(get_db)):
    query = select(Submission).where(Submission.user_id == user.id)
    if exercise:
        query = query.where(Submission.exercise == exercise)
    rows = db.scalars(query.order_by(Submission.id.desc())).all()
    return {"submissions": [submission_json(request, s, with_result=False) for s in rows]}


@router.get("/{submission_id}", name="get_submission")
def get_submission(submission_id: int, request: Request, user: User = Depends(current_user),
                   db: Session = Depends(get_db)):
    s = db.get(Submission, submission_id)
    if s is None or (s.user_id != user.id and user.role is not Role.INSTRUCTOR):
        raise HTTPException(404, f"no submission {submission_id} of yours")
    return submission_json(request, s)
