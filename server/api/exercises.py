from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session

from ..auth.deps import exercise_or_error, get_db, optional_user
from ..domain.deadlines import StudentDeadline, deadline_for, deadlines_for
from ..domain.formatting import iso
from ..domain.models import User
from ..domain.student_params import params_for

router = APIRouter(prefix="/api/exercises", tags=["exercises"])


def _deadlines(d: StudentDeadline) -> dict:
    """`deadline` is the reader's own (a signed-in student's extension moves it); the
    course's is beside it, and `extended` says which it is. The instructor's note is not
    shown: it is theirs."""
    return {"deadline": iso(d.at), "course_deadline": iso(d.course), "extended": d.extended}


@router.get("")
def list_exercises(request: Request, user: User | None = Depends(optional_user),
                   db: Session = Depends(get_db, scope="function")):
    deadline = deadlines_for(db, request.app.state.settings, user)
    return {"exercises": [
        {"name": e.name, "title": e.title, "summary": e.summary, "languages": e.languages,
         **_deadlines(deadline(e))}
        for e in request.app.state.exercises.values()]}


@router.get("/{name}")
def get_exercise(name: str, request: Request, user: User | None = Depends(optional_user),
                 db: Session = Depends(get_db, scope="function")):
    e = exercise_or_error(request, name)
    due = deadline_for(db, request.app.state.settings, e, user)
    return {"name": e.name, "title": e.title, "summary": e.summary, "languages": e.languages,
            "entry_points": e.entry_points, **_deadlines(due),
            "statement": e.statement, "skeletons": e.skeletons, "checks": e.checks,
            "params": _own_params(request, e, user)}


def _own_params(request: Request, e, user: User | None) -> dict | None:
    """The reader's own values of the exercise's parameters (server/domain/student_params.py):
    {} for an exercise without any; None to a reader we do not know, whose they are not."""
    if not e.params:
        return {}
    if user is None:
        return None
    return params_for(request.app.state.settings, request.app.state.exercises, e.name,
                      user.username)
