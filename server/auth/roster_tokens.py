"""A roster's tokens: one for each new student, a fresh one for each known one."""

from __future__ import annotations

from fastapi import HTTPException
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain.models import Role, User
from ..domain.roster import StudentIn
from .sessions import end_sessions_of
from .tokens import hash_token, new_token

ROSTER_BATCH = 500  # usernames per query (SQLite takes 32,766 parameters, PostgreSQL 65,535)


def issue_tokens(db: Session, students: list[StudentIn]) -> list[dict[str, str]]:
    """New students get a token; a known username gets a fresh one (the old stops working,
    and so do browser sessions made with it). Committed as one; an instructor's username
    refuses the whole roster (409). Blocking: routes run it on a thread (a 3,000-student
    roster took 2.6 s on the event loop, and the whole server waited: issue 26, item 6)."""
    names = [s.username for s in students]
    known: dict[str, User] = {}
    for start in range(0, len(names), ROSTER_BATCH):
        known.update((u.username, u) for u in db.scalars(
            select(User).where(User.username.in_(names[start:start + ROSTER_BATCH]))))
    instructors = [n for n in names if n in known and known[n].role is Role.INSTRUCTOR]
    if instructors:
        raise HTTPException(409, f"{instructors[0]!r} is an instructor")
    issued, reissued = [], []
    for student in students:
        token = new_token()
        user = known.get(student.username)
        if user is None:
            db.add(User(username=student.username, display_name=student.display_name,
                        role=Role.STUDENT, token_hash=hash_token(token)))
        else:
            user.display_name, user.token_hash = student.display_name, hash_token(token)
            reissued.append(user.id)
        issued.append({"username": student.username, "display_name": student.display_name,
                       "token": token})
    for start in range(0, len(reissued), ROSTER_BATCH):
        end_sessions_of(db, reissued[start:start + ROSTER_BATCH])  # old tokens' browsers
    db.commit()
    return issued
