"""The way out of the LMS's frame: a one-time link that signs its browser in, at our own
address, in a tab of its own.

Browsers keep no cookie of ours inside another site's frame (third-party cookies blocked),
so a session there would not last one click. The launch page in the frame offers "Open in
a new tab": a link holding a code that is good ENTRY_S and once. Its page asks "Continue as
…" and only that button's post (from our own origin) starts an ordinary first-party session
(the same cookie as a token sign-in) and goes on to the exercise: a GET that signed in would
let anyone's link sign a browser in as them.
"""

from __future__ import annotations

import secrets

from sqlalchemy.orm import Session

from ..auth.tokens import hash_token
from . import once

ENTRY_S = 120
_PREFIX = "entry-"


def new_entry(db: Session, user_id: int, next_path: str) -> str:
    """A code for ``user_id`` to enter at ``next_path``; the caller commits."""
    code = secrets.token_urlsafe(32)
    once.put(db, _PREFIX + hash_token(code), {"user_id": user_id, "next": next_path}, ENTRY_S)
    return code


def peek_entry(db: Session, code: str) -> dict | None:
    """What a live code stands for, without spending it (the page that asks to go on)."""
    return once.peek(db, _PREFIX + hash_token(code or ""))


def use_entry(db: Session, code: str) -> dict | None:
    """What a code stands for, if it is live and unused; it is spent either way."""
    return once.take(db, _PREFIX + hash_token(code or ""))
