"""Instructor endpoints for extensions: one student's later deadline for one exercise
(the rules: server/domain/deadlines.py)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from ..auth.deps import get_db, instructor
from ..domain.deadlines import (NOTE_MAX, Unaccepted, all_extensions, deadline_of, grant,
                                parse_deadline, revoke)
from ..domain.formatting import iso
from ..domain.models import Extension, User
from .deps import read_json

router = APIRouter(prefix="/api/admin/extensions", tags=["admin"])


class ExtensionIn(BaseModel):
    username: str = Field(min_length=1, max_length=64)
    exercise: str = Field(min_length=1, max_length=64)
    deadline: str = Field(min_length=1, max_length=64)  # ISO 8601 with a timezone
    note: str = Field("", max_length=NOTE_MAX)


def extension_json(extension: Extension, course: datetime | None) -> dict:
    return {"username": extension.user.username, "display_name": extension.user.display_name,
            "exercise": extension.exercise, "deadline": iso(extension.deadline),
            "course_deadline": iso(course), "granted_at": iso(extension.granted_at),
            "granted_by": extension.granter.username if extension.granter else None,
            "note": extension.note}


@router.get("")
def list_extensions(request: Request, exercise: str = "", student: str = "",
                    _: User = Depends(instructor), db: Session = Depends(get_db, scope="function")):
    state = request.app.state
    return {"extensions": [extension_json(e, course) for e, course in all_extensions(
        db, state.settings, state.exercises, exercise, student)]}


@router.post("")
async def grant_extension(request: Request, by: User = Depends(instructor),
                          db: Session = Depends(get_db, scope="function")):
    """{"username", "exercise", "deadline" (ISO 8601, timezone required), "note"?}: grants or
    replaces; that student's submissions to it are re-marked late or on time."""
    try:
        body = ExtensionIn.model_validate(await read_json(request))
    except ValueError as exc:
        raise HTTPException(422, f"bad extension: {exc}") from None
    state = request.app.state
    try:
        extension, changed = grant(db, state.settings, state.exercises, body.username,
                                   body.exercise, parse_deadline(body.deadline, False),
                                   body.note, by)
    except Unaccepted as refused:
        raise HTTPException(refused.status, refused.detail) from None
    course = deadline_of(state.settings, state.exercises[extension.exercise])
    return dict(extension_json(extension, course), remarked=changed)


@router.delete("/{username}/{exercise}")
def remove_extension(username: str, exercise: str, request: Request,
                     _: User = Depends(instructor), db: Session = Depends(get_db, scope="function")):
    state = request.app.state
    try:
        changed = revoke(db, state.settings, state.exercises, username, exercise)
    except Unaccepted as refused:
        raise HTTPException(refused.status, refused.detail) from None
    return {"removed": {"username": username, "exercise": exercise}, "remarked": changed}
