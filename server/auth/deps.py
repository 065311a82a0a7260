"""The request's guards, shared by the JSON API (server/api/) and the pages (server/web/):
its database session, who asks (a bearer token or a browser's session cookie), and whether
what they ask for exists and is theirs to see."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from ..domain.exercises import ExerciseInfo
from ..domain.models import Role, Submission, User
from ..domain.validation import MAX_ID
from .sessions import COOKIE, session_user
from .tokens import user_for_token

bearer = HTTPBearer(auto_error=False)
DbId = Annotated[int, Path(ge=1, le=MAX_ID, description="an id (1 to 2**63 - 1)")]


def get_db(request: Request):
    with request.app.state.sessionmaker() as session:
        yield session


def authenticated(request: Request, db: Session, user: User | None) -> User | None:
    """Hand the connection back between the guard and the endpoint, and say whose request
    this is. A sync guard and a sync endpoint run on two threads in turn: a connection
    kept between them was held by a request waiting for a thread, and 40 such requests
    starved a pool of 15 while the threads waited for it (issue 39). Ending the read's
    transaction returns it (``expire_on_commit=False``: the user stays loaded); the
    endpoint checks one out again when it reads. The role tells the principal limits
    (server/core/principal_limits.py) this credential's budget."""
    db.commit()
    if user is not None:
        request.state.principal_role = user.role.value
    return user


def current_user(request: Request,
                 credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
                 db: Session = Depends(get_db, scope="function")) -> User:
    """A bearer token (curl), or the signed-in browser's cookie."""
    cookie = None if credentials else request.cookies.get(COOKIE)
    if cookie is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
        # a cookie rides along on any site's form: changes through the API need the bearer
        # token (the pages' own forms carry their CSRF token instead: server/auth/csrf.py)
        raise HTTPException(403, "send `Authorization: Bearer <token>` to change anything "
                                 "through the API; the sign-in cookie only reads")
    if credentials is None and cookie is None:
        raise HTTPException(401, "missing bearer token: send `Authorization: Bearer <token>`",
                            headers={"WWW-Authenticate": "Bearer"})
    user = user_for_token(db, credentials.credentials) if credentials else \
        session_user(request, db)
    if authenticated(request, db, user) is None:
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
    user = user_for_token(db, credentials.credentials) if credentials is not None else \
        session_user(request, db)
    return authenticated(request, db, user)


def own_submission(db, user: User, submission_id: int) -> Submission:
    """The submission if it is the user's own, or the user teaches; else 404 (never 403:
    whether another student's submission exists is not the asker's to learn)."""
    s = db.get(Submission, submission_id)
    if s is None or (s.user_id != user.id and user.role is not Role.INSTRUCTOR):
        raise HTTPException(404, f"no submission {submission_id} of yours")
    return s


def exercise_or_error(request: Request, name: str, status: int = 404) -> ExerciseInfo:
    exercises = request.app.state.exercises
    if name not in exercises:
        raise HTTPException(status, f"unknown exercise {name!r} (known: {', '.join(exercises)})")
    return exercises[name]
