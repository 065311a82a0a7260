"""Bearer tokens: random, shown once, stored as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from .models import Role, User, WebSession, utcnow

bearer = HTTPBearer(auto_error=False)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def get_db(request: Request):
    with request.app.state.sessionmaker() as session:
        yield session


COOKIE = "autograder_session"  # the web pages' session: HttpOnly, SameSite=Lax


def user_for_token(db: Session, token: str | None) -> User | None:
    """The user whose API token this is (the bearer token of curl)."""
    if not token:
        return None
    return db.scalar(select(User).where(User.token_hash == hash_token(token)))


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


def end_sessions_of(db: Session, user_ids: list[int]) -> None:
    """Every browser session of users whose token changed (they would not count anyway:
    this keeps the table small). The caller commits."""
    if user_ids:
        db.execute(delete(WebSession).where(WebSession.user_id.in_(user_ids)))


def end_session(db: Session, session_token: str | None) -> None:
    if session_token:
        db.execute(delete(WebSession).where(WebSession.token_hash == hash_token(session_token)))
        db.commit()


def current_user(request: Request,
                 credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
                 db: Session = Depends(get_db, scope="function")) -> User:
    """A bearer token (curl), or the signed-in browser's cookie."""
    cookie = None if credentials else request.cookies.get(COOKIE)
    if cookie is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
        # a cookie rides along on any site's form: changes through the API need the bearer
        # token (the pages' own forms carry their CSRF token instead: server/csrf.py)
        raise HTTPException(403, "send `Authorization: Bearer <token>` to change anything "
                                 "through the API; the sign-in cookie only reads")
    if credentials is None and cookie is None:
        raise HTTPException(401, "missing bearer token: send `Authorization: Bearer <token>`",
                            headers={"WWW-Authenticate": "Bearer"})
    user = user_for_token(db, credentials.credentials) if credentials else \
        session_user(request, db)
    if user is None:
        raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    return user


def instructor(user: User = Depends(current_user)) -> User:
    if user.role is not Role.INSTRUCTOR:
        raise HTTPException(403, "instructors only")
    return user


def optional_user(request: Request,
                  credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
                  db: Session = Depends(get_db, scope="function")) -> User | None:
    """Who reads a public page, if anyone we know: it shows them their own view (their
    deadline, say). An unknown token reads like no token: the page is public either way."""
    if credentials is not None:
        return user_for_token(db, credentials.credentials)
    return session_user(request, db)
