"""The instructor page's extension forms: grant one student a later deadline for one
exercise, or remove it (the rules: server/domain/deadlines.py). Post, then redirect back to /admin
with a notice, like the page's other forms; bad input shows the page again with a 4xx."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session

from ..auth import csrf
from ..auth.deps import get_db
from ..domain.deadlines import Unaccepted, grant, parse_deadline, revoke
from ..domain.models import User
from .guards import instructor_page
from .instructor import admin_view, with_notice

router = APIRouter(include_in_schema=False)


@router.post("/admin/extensions", dependencies=[Depends(csrf.check_form)])
def admin_grant(request: Request, username: str = Form(""), exercise: str = Form(""),
                deadline: str = Form(""), note: str = Form(""),
                user: User = Depends(instructor_page),
                db: Session = Depends(get_db, scope="function")):
    """The page's deadline field is a datetime-local one labelled UTC: read as UTC. A
    refused grant shows the form again as it was typed."""
    state = request.app.state
    try:
        if not (username and exercise and deadline):
            raise Unaccepted(422, "choose the student and the exercise, and give the new "
                                  "deadline")
        _, changed = grant(db, state.settings, state.exercises, username, exercise,
                           parse_deadline(deadline, assume_utc=True), note.strip(), user)
    except Unaccepted as refused:
        db.rollback()
        return admin_view(request, user, db, status=refused.status,
                      extension_error=f"No extension granted: {refused.on_page()}.",
                      extension_form={"username": username, "exercise": exercise,
                                      "deadline": deadline, "note": note})
    return RedirectResponse(with_notice("/admin", "extended", f"{username} for {exercise}",
                                         changed), status_code=303)


@router.post("/admin/extensions/remove", dependencies=[Depends(csrf.check_form)])
def admin_revoke(request: Request, username: str = Form(""), exercise: str = Form(""),
                 user: User = Depends(instructor_page),
                 db: Session = Depends(get_db, scope="function")):
    state = request.app.state
    try:
        changed = revoke(db, state.settings, state.exercises, username, exercise)
    except Unaccepted as refused:
        db.rollback()
        return admin_view(request, user, db, status=refused.status,
                      extension_error=f"Nothing removed: {refused.on_page()}.")
    return RedirectResponse(with_notice("/admin", "unextended", f"{username} for {exercise}",
                                         changed), status_code=303)
