"""Who reads a page, remembered in memory, for the pages read most (the leaderboard).

A signed-in reader cost a thread and a database query per request: the leaderboard page
served 410 a second to 16 signed-in connections (p99 120 ms) against 1,500 to readers
without a session. A session seen once is kept here as a ``Reader`` (what a page shows of
its user) and served from memory until:

- it expires (SESSION_DAYS after it was made: checked on every use);
- any commit deletes a browser session (sign-out, a purge, a re-issued token) or changes a
  user's token, name or role: then every remembered reader is forgotten at once (these are
  rare, and the next request of each reader looks it up again).

A lookup that raced with such a commit is not remembered (a generation counter), so a
revoked session is never served from here after its revocation committed; a revocation
committed by another server process is applied here within about a second
(server/core/shared_state.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

from fastapi import Request
from sqlalchemy import event
from sqlalchemy.orm import Session

from ..core.clock import as_utc, utcnow
from ..core.commit_hooks import changed_columns, note
from ..core.shared_state import share
from ..domain.models import Role, User, WebSession
from .sessions import COOKIE, session_lifetime, session_query
from .tokens import hash_token

MAX_REMEMBERED = 20_000  # readers; past it the memory starts again (each costs ~300 bytes)
_USER_COLUMNS = frozenset({"token_hash", "display_name", "role"})


@dataclass(frozen=True)
class Reader:
    """What a page shows of its signed-in reader (read-only, shared between threads)."""

    id: int
    username: str
    display_name: str
    role: Role


_lock = threading.Lock()
_remembered: dict[str, tuple[Reader, datetime]] = {}  # session hash -> reader, session's start
_generation = [0]


def remembered(request: Request) -> tuple[bool, Reader | None]:
    """(known, reader): known is False when the database must be asked (``look_up``)."""
    token = request.cookies.get(COOKIE)
    if not token:
        return True, None
    hit = _remembered.get(hash_token(token))
    if hit is not None and hit[1] > utcnow() - session_lifetime(request):
        return True, hit[0]
    return False, None


def look_up(request: Request, db: Session) -> Reader | None:
    """The reader from the database, remembered for next time."""
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    generation = _generation[0]
    row = db.execute(session_query(token, session_lifetime(request))
                     .add_columns(WebSession.created_at)).first()
    if row is None:
        return None
    user, started = row
    reader = Reader(user.id, user.username, user.display_name, user.role)
    with _lock:
        if generation == _generation[0]:  # no revocation committed meanwhile
            if len(_remembered) >= MAX_REMEMBERED:
                _remembered.clear()
            _remembered[hash_token(token)] = (reader, as_utc(started))
    return reader


def forget_all() -> None:
    with _lock:
        _generation[0] += 1
        _remembered.clear()


# -- what a commit revoked --------------------------------------------------------------------

_REVOKES = "readers_revoked"


@event.listens_for(Session, "after_flush")
def _note_flushed(session: Session, _context) -> None:
    for obj in session.deleted:
        if isinstance(obj, (WebSession, User)):
            note(session, _REVOKES, "revoked")
    for obj in session.dirty:
        if isinstance(obj, User) and changed_columns(obj) & _USER_COLUMNS:
            note(session, _REVOKES, "revoked")


@event.listens_for(Session, "do_orm_execute")
def _note_bulk(execute_state):
    if not (execute_state.is_update or execute_state.is_delete):
        return None
    mapper = execute_state.bind_mapper
    if mapper is not None and mapper.class_ not in (WebSession, User):
        return None
    result = execute_state.invoke_statement()
    if result.rowcount:  # a purge that found nothing expired revokes nothing
        note(execute_state.session, _REVOKES, "revoked")
    return result


# here at the commit, and in every other server process within about a second
share(_REVOKES, lambda _: forget_all())


