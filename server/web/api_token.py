"""A signed-in user's own API token, for curl and CI (issue 40): a student who arrived by
an LMS launch was never handed one. Shown once; getting a new one ends the old (and, as a
token change does, every browser session made with it: this browser gets a new one)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from ..auth import csrf
from ..auth.deps import get_db
from ..auth.sessions import (COOKIE, end_sessions_of, session_lifetime, set_session_cookie,
                             start_session)
from ..auth.tokens import hash_token, new_token
from ..domain.models import User
from .guards import signed_in
from .render import render

router = APIRouter(include_in_schema=False)


@router.post("/me/token", response_class=HTMLResponse, dependencies=[Depends(csrf.check_form)])
def new_api_token(request: Request, user: User = Depends(signed_in),
                  db: Session = Depends(get_db, scope="function")):
    token = new_token()
    user = db.merge(user)
    user.token_hash = hash_token(token)
    end_sessions_of(db, [user.id])
    db.flush()
    session = start_session(db, user, session_lifetime(request))  # commits
    request.cookies[COOKIE] = session  # this page's forms are this new session's
    response = render(request, "api_token.html", user, token=token)
    set_session_cookie(response, request, session)
    return response
