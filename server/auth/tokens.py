"""Bearer tokens: random, shown once, stored as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain.models import User


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def user_for_token(db: Session, token: str | None) -> User | None:
    """The user whose API token this is (the bearer token of curl)."""
    if not token:
        return None
    return db.scalar(select(User).where(User.token_hash == hash_token(token)))
