"""Who reads a page: the signed-in browser's user (from its session cookie), sent to sign
in where a page needs one, and refused where a page is the instructor's."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from ..auth.deps import authenticated, get_db
from ..auth.sessions import session_user
from ..domain.models import Role, User


def user_for_token_in(request: Request) -> User | None:
    with request.app.state.sessionmaker() as db:
        return session_user(request, db)


def viewer(request: Request, db: Session = Depends(get_db, scope="function")) -> User | None:
    return authenticated(request, db, session_user(request, db))


def signed_in(request: Request, user: User | None = Depends(viewer)) -> User:
    if user is None:  # back to this page after signing in
        raise HTTPException(303, headers={"Location": signin_url(request.url.path,
                                                                 request.url.query)})
    return user


def signin_url(path: str, query: str = "") -> str:
    here = path + (f"?{query}" if query else "")
    return "/signin" if path in ("/", "/signin") else "/signin?" + urlencode({"next": here})


def own_path(target: str, default: str = "/exercises") -> str:
    """``target`` if it is a path of this app (never another site's address), else
    ``default``."""
    parts = urlsplit(target or "")
    if parts.scheme or parts.netloc or not parts.path.startswith("/") \
            or parts.path.startswith("//") or "\\" in target:
        return default
    return parts.path + (f"?{parts.query}" if parts.query else "")


def instructor_page(user: User = Depends(signed_in)) -> User:
    if user.role is not Role.INSTRUCTOR:
        raise HTTPException(403, "instructors only")
    return user
