"""A browser's sign-in: a session cookie that stands for the user while it lasts."""

from __future__ import annotations

from datetime import timedelta

from fastapi import Request
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..core.clock import utcnow
from ..domain.models import User, WebSession
from .tokens import hash_token, new_token

COOKIE = "autograder_session"  # the web pages' session: HttpOnly, SameSite=Lax


# A browser's session ends (issue 26, item 4): when it is older than SESSION_DAYS; when the
# API token it was made with is re-issued or ADMIN_TOKEN changes (the session keeps the hash
# of that token, and counts only while the user's token is still it: however the token
# changes); when its user signs in for the MAX_SESSIONS_PER_USER + 1st time (the oldest
# goes). Each sign-in also deletes every expired session, so the table stays bounded.
MAX_SESSIONS_PER_USER = 10


def session_lifetime(request: Request) -> timedelta:
    return timedelta(days=request.app.state.settings.session_days)


def user_for_session(db: Session, session_token: str | None,
                     lifetime: timedelta) -> User | None:
    """The user a browser's session cookie stands for, while the session lasts."""
    if not session_token:
        return None
    return db.scalar(session_query(session_token, lifetime))


def session_query(session_token: str, lifetime: timedelta):
    """The user of a session that still lasts: made with the user's token of now, younger
    than ``lifetime``."""
    return (select(User).join(WebSession, WebSession.user_id == User.id)
            .where(WebSession.token_hash == hash_token(session_token),
                   WebSession.user_token_hash == User.token_hash,
                   WebSession.created_at > utcnow() - lifetime))


def session_user(request: Request, db: Session) -> User | None:
    """The signed-in browser's user, from its session cookie, if the session still lasts."""
    return user_for_session(db, request.cookies.get(COOKIE), session_lifetime(request))


def start_session(db: Session, user: User, lifetime: timedelta) -> str:
    db.execute(delete(WebSession).where(WebSession.created_at <= utcnow() - lifetime))
    newest = select(WebSession.id).where(WebSession.user_id == user.id) \
        .order_by(WebSession.id.desc()).limit(MAX_SESSIONS_PER_USER - 1)
    db.execute(delete(WebSession).where(WebSession.user_id == user.id,
                                        WebSession.id.not_in(newest)))
    token = new_token()
    db.add(WebSession(user_id=user.id, token_hash=hash_token(token),
                      user_token_hash=user.token_hash))
    db.commit()
    return token


def set_session_cookie(response, request: Request, session_token: str) -> None:
    """The browser's session cookie: HttpOnly, SameSite=Lax, Secure over https, lasting
    the session's lifetime. Every sign-in sets it here (a token, an LMS's entry link, a
    new API token)."""
    response.set_cookie(COOKIE, session_token, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https",
                        max_age=int(session_lifetime(request).total_seconds()))


def end_sessions_of(db: Session, user_ids: list[int]) -> None:
    """Every browser session of users whose token changed (they would not count anyway:
    this keeps the table small). The caller commits."""
    if user_ids:
        db.execute(delete(WebSession).where(WebSession.user_id.in_(user_ids)))


def end_session(db: Session, session_token: str | None) -> None:
    if session_token:
        db.execute(delete(WebSession).where(WebSession.token_hash == hash_token(session_token)))
        db.commit()
