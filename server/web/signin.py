"""Signing in and out: a token, typed once, becomes an HttpOnly, SameSite=Lax session
cookie (so other sites cannot post forms with it); the API accepts that cookie for reading,
which is how the submission page polls for its result."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.orm import Session

from ..auth import csrf
from ..auth.deps import get_db
from ..auth.sessions import (COOKIE, end_session, session_lifetime, set_session_cookie,
                             start_session)
from ..auth.tokens import user_for_token
from ..domain.models import User
from .guards import own_path, viewer
from .render import render

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def home():
    return RedirectResponse("/exercises", status_code=303)


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request, next: str = "", signed_out: str = "",
                expired_link: str = "", user: User | None = Depends(viewer)):
    # after signing out, the page says so (it looked as if nothing had happened); a link
    # from an LMS's frame that was used or too old (server/lti/entry.py) says what to do
    notice = "You are signed out." if signed_out and user is None else ""
    if expired_link:
        notice = ("That link from your course was used already or is too old: open the "
                  "activity in your course again for a new one.")
    return render(request, "signin.html", user, next=own_path(next, ""), notice=notice)


@router.post("/signin", dependencies=[Depends(csrf.check_form)])
def signin(request: Request, token: str = Form(""), next: str = Form(""),
           db: Session = Depends(get_db, scope="function")):
    user = user_for_token(db, token.strip())
    if user is None:
        return render(request, "signin.html", None, 401, next=own_path(next, ""),
                      error="That token is not known. Ask your instructor for yours.")
    response = RedirectResponse(own_path(next), status_code=303)
    set_session_cookie(response, request, start_session(db, user, session_lifetime(request)))
    return response


@router.post("/signout", dependencies=[Depends(csrf.check_form)])
def signout(request: Request, db: Session = Depends(get_db, scope="function")):
    end_session(db, request.cookies.get(COOKIE))  # the cookie is worthless from now on
    response = RedirectResponse("/signin?signed_out=1", status_code=303)
    response.delete_cookie(COOKIE)
    return response
