"""The server's times: aware, in UTC, whatever the database gives back."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """SQLite gives back naive datetimes; every time stored here is UTC. PostgreSQL gives
    them in its session's timezone, which need not be UTC: converted, so that every time
    the server writes (pages, JSON, CSV) reads +00:00 alike."""
    return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
