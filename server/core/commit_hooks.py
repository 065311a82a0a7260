"""What a session's transaction changed, handed on when it commits, dropped on rollback.

The in-memory views that must follow the database (server/domain/board_cache.py: the leaderboards;
server/auth/readers.py: the signed-in readers) each note, while a session flushes or executes,
what its writes touched, and act on it only once the transaction has committed: a reader
that looked before the commit must not see its effect early, nor a rolled-back one ever.
"""

from __future__ import annotations

from typing import Callable

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session


def note(session: Session, key: str, value: str) -> None:
    """Remember ``value`` under ``key`` until this session's transaction ends."""
    session.info.setdefault(key, set()).add(value)


def changed_columns(obj) -> set[str]:
    """The attributes of a flushed object whose value this transaction changed."""
    return {attr.key for attr in inspect(obj).attrs if attr.history.has_changes()}


def note_bulk_writes(key: str, value: str, tables: tuple[type, ...], unless: str) -> None:
    """Note ``value`` under ``key`` for every bulk UPDATE or DELETE of ``tables`` (or of
    no known table), whose rows are not known: unless its statement says, by the execution
    option ``unless``, that it changes nothing the noting view shows."""

    @event.listens_for(Session, "do_orm_execute")
    def _note_bulk(execute_state) -> None:
        if not (execute_state.is_update or execute_state.is_delete):
            return
        if execute_state.execution_options.get(unless):
            return
        mapper = execute_state.bind_mapper
        if mapper is None or mapper.class_ in tables:
            note(execute_state.session, key, value)


def on_commit(key: str, apply: Callable[[set[str]], None]) -> None:
    """Call ``apply`` with what was noted under ``key`` once a transaction that noted
    something commits; forget it when the transaction rolls back."""

    @event.listens_for(Session, "after_commit")
    def _apply(session: Session) -> None:
        noted = session.info.pop(key, None)
        if noted:
            apply(noted)

    @event.listens_for(Session, "after_rollback")
    def _forget(session: Session) -> None:
        session.info.pop(key, None)
