"""Bearer tokens: random, shown once, stored as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.orm import Session

from .models import Role, User

bearer = HTTPBearer(auto_error=False)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def get_db(request: Request):
    with request.app.state.sessionmaker() as session:
        yield session


COOKIE = "autograder_token"  # the web pages' session: HttpOnly, SameSite=Lax


def user_for_token(db: Session, token: str | None) -> User | None:
    if not token:
        return None
    return db.scalar(select(User).where(User.token_hash == hash_token(token)))


def current_user(request: Request,
                 credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
                 db: Session = Depends(get_db)) -> User:
    """A bearer token (curl), or the signed-in browser's cookie."""
    token = credentials.credentials if credentials else request.cookies.get(COOKIE)
    if not credentials and token is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
        # a cookie rides along on any site's form: changes through the API need the bearer
        # token (the pages' own forms carry their CSRF token instead: server/csrf.py)
        raise HTTPException(403, "send `Authorization: Bearer <token>` to change anything "
                                 "through the API; the sign-in cookie only reads")
    if token is None:
        raise HTTPException(401, "missing bearer token: send `Authorization: Bearer <token>`",
                            headers={"WWW-Authenticate": "Bearer"})
    user = user_for_token(db, token)
    if user is None:
        raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    return user


def instructor(user: User = Depends(current_user)) -> User:
    if user.role is not Role.INSTRUCTOR:
        raise HTTPException(403, "instructors only")
    return user
