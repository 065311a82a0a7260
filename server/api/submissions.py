"""Submitting and reading submissions."""

from __future__ import annotations

from pathlib import PurePath

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..auth.deps import DbId, current_user, get_db, own_submission
from ..domain.admission import Refused
from ..domain.formatting import iso
from ..domain.models import Submission, User
from ..domain.progress import progress_of
from ..domain.submissions import accept_submission
from .deps import read_json, submission_json, submission_url

router = APIRouter(prefix="/api/submissions", tags=["submissions"])


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
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("exercise"), str) \
                or not isinstance(body.get("source"), str):
            raise HTTPException(422, 'JSON needs {"exercise": ..., "language": ..., "source": ...}')
        language = body.get("language") if isinstance(body.get("language"), str) else None
        return body["exercise"], language, str(body.get("filename") or "submission"), body["source"]
    raise HTTPException(415, "send multipart/form-data (exercise, file) or JSON "
                             '{"exercise", "language", "source"}')


@router.post("", status_code=202)
async def create_submission(request: Request, user: User = Depends(current_user),
                            db: Session = Depends(get_db, scope="function")):
    exercise, language, filename, raw = await _read_body(request)
    try:
        submission = accept_submission(db, request.app.state.settings, request.app.state.exercises,
                                       user, exercise, language, filename, raw,
                                       uploaded=isinstance(raw, bytes))  # multipart: a file
    except Refused as refused:
        raise HTTPException(refused.status, refused.detail, headers=refused.headers) from None
    request.app.state.dispatcher.notify()
    return JSONResponse(status_code=202, content={
        "id": submission.id, "status": submission.status.value,
        "url": submission_url(request, submission.id),
        "late": submission.late, "first_tried_at": iso(submission.first_tried_at)})


@router.get("")
def my_submissions(request: Request, exercise: str | None = None,
                   user: User = Depends(current_user), db: Session = Depends(get_db, scope="function")):
    query = select(Submission).where(Submission.user_id == user.id)
    if exercise:
        query = query.where(Submission.exercise == exercise)
    rows = db.scalars(query.order_by(Submission.id.desc())).all()
    return {"submissions": [submission_json(request, s, with_result=False) for s in rows]}


@router.get("/{submission_id}", name="get_submission")
def get_submission(submission_id: DbId, request: Request, user: User = Depends(current_user),
                   db: Session = Depends(get_db, scope="function")):
    return submission_view(request, db, own_submission(db, user, submission_id))


def submission_view(request: Request, db: Session, s: Submission,
                    with_result: bool = True) -> dict:
    """A submission as its reader sees it: its JSON and, while it waits or runs, its
    progress ({"queue_position", "checks", ...}). The poll and the stream (events.py) alike."""
    out = submission_json(request, s, with_result=with_result)
    progress = progress_of(request, db, s)
    if progress is not None:
        out["progress"] = progress
    return out
