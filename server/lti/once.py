"""Values kept in ``lti_kv`` for a while and spent once: the entry codes (entry.py) and the
deep-linking requests waiting for a pick (deep_linking.py). PyLTI1p3's state and nonces
live there too, through its own storage (adapter.py)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete
from sqlalchemy.orm import Session

from ..core.clock import as_utc, utcnow
from ..domain.lti_records import LtiKv


def put(db: Session, key: str, value: dict, lifetime_s: float) -> None:
    """Keep ``value`` under ``key`` for ``lifetime_s``; the caller commits."""
    db.add(LtiKv(key=key, value=value, expires_at=utcnow() + timedelta(seconds=lifetime_s)))


def peek(db: Session, key: str) -> dict | None:
    """The value under ``key`` while it lives, left in place."""
    row = db.get(LtiKv, key)
    return row.value if row is not None and as_utc(row.expires_at) > utcnow() else None


def take(db: Session, key: str) -> dict | None:
    """The value under ``key`` if it lives, spent either way: of two takers at once only
    the one whose delete removed the row gets it."""
    row = db.get(LtiKv, key)
    if row is None:
        return None
    live = as_utc(row.expires_at) > utcnow()
    gone = db.execute(delete(LtiKv).where(LtiKv.key == key)).rowcount == 1
    return row.value if live and gone else None
