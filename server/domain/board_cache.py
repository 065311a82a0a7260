"""Leaderboards served from memory, computed again only when something on them changed.

At 10,000 graded submissions (issue 26, item 5) a board takes ~25 ms to compute. It was kept
until the next commit of any kind, and every request that found it stale computed it again:
the grading slot's empty poll and every sign-in committed, so the board was recomputed every
few seconds even when idle, by as many requests at once as were waiting (16 connections: 54
requests/s, p99 2.4 s). Now:

- **Only a real change clears it.** A commit clears the boards it touched, found from what it
  wrote: a submission whose verdict, score, flag, late mark, status (...) changed, or one
  added as already graded; a grading run; a student's name or role; anything deleted; and any
  bulk UPDATE or DELETE of those tables, unless the statement says it leaves every board as
  it is (``execution_options(board_neutral=True)``: a claim, a release, a requeue). A sign-in,
  a heartbeat or an empty poll clears nothing.
- **One computes, the others wait for it** (one lock per board), then all serve its bytes.
- **Served without the database:** the API's route finds a fresh board with no session and
  no thread (``cached``); the answer carries an ``ETag`` (a hash of its bytes, so a restart
  never reuses one for other contents) and ``If-None-Match`` gets 304.

A commit of this process clears its boards at once; one of another server process (two
behind a proxy) within about a second, through the database's change stamps
(server/core/shared_state.py).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from dataclasses import dataclass, field
from itertools import chain

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.util import identity_key

from ..core.commit_hooks import changed_columns, note, note_bulk_writes
from ..core.shared_state import share
from .leaderboard import LATE_POLICIES, compute_leaderboard
from .models import GradeRun, Status, Submission, User

ALL = "*"  # every exercise's board
# what a board reads of a submission and of a user; a change to anything else leaves it be
SUBMISSION_COLUMNS = frozenset({"status", "score", "verdict", "flag", "late", "regrade_pending",
                                "user_id", "exercise", "created_at"})
USER_COLUMNS = frozenset({"display_name", "role"})
_TABLES = (Submission, GradeRun, User)
_CHANGED = "boards_changed"  # a session's pending marks, in session.info


@dataclass
class Snapshot:
    """One board as computed at ``version``: its entries, its API answer and that answer's
    ETag; the page's rendered rows are kept beside them once a page has been asked for."""

    version: int
    entries: list[tuple[int, dict]]
    json: bytes
    etag: str
    rendered: dict = field(default_factory=dict)


_counter = itertools.count(1)
_state_lock = threading.Lock()
_version_all = 0
_versions: dict[str, int] = {}
_snapshots: dict[tuple[str, str], Snapshot] = {}
_compute_locks: dict[tuple[str, str], threading.Lock] = {}


def version(exercise: str) -> int:
    """Grows whenever this exercise's boards may have changed."""
    return max(_version_all, _versions.get(exercise, 0))


def changed(exercises: set[str]) -> None:
    """Clear the boards of ``exercises`` (``ALL``: every one)."""
    global _version_all
    with _state_lock:
        stamp = next(_counter)
        if ALL in exercises:
            _version_all = stamp
        else:
            for name in exercises:
                _versions[name] = stamp


def cached(exercise: str, policy: str) -> Snapshot | None:
    """The board if it is fresh; None if it must be computed. No database, no waiting."""
    snapshot = _snapshots.get((exercise, policy))
    return snapshot if snapshot is not None and snapshot.version == version(exercise) else None


def board(sessions: sessionmaker[Session], exercise: str, policy: str) -> Snapshot:
    """The fresh board, computed here if it must be, by one caller at a time, in a session
    of its own: its read must begin after the version is read (an older snapshot of the
    database would be stamped with a newer version, and kept)."""
    snapshot = cached(exercise, policy)
    if snapshot is not None:
        return snapshot
    with _state_lock:
        lock = _compute_locks.setdefault((exercise, policy), threading.Lock())
    with lock:
        snapshot = cached(exercise, policy)  # another caller may just have computed it
        if snapshot is not None:
            return snapshot
        # read the version first: a change committed while computing leaves it stale
        at = version(exercise)
        with sessions() as db:
            entries = compute_leaderboard(db, exercise, policy)
        encoded = json.dumps({"exercise": exercise, "late_policy": policy,
                              "late_policy_says": LATE_POLICIES[policy],
                              "entries": [e for _, e in entries]},
                             separators=(",", ":")).encode()
        etag = '"' + hashlib.sha256(encoded).hexdigest()[:32] + '"'
        snapshot = Snapshot(at, entries, encoded, etag)
        _snapshots[(exercise, policy)] = snapshot
        return snapshot


# -- what a commit changed ------------------------------------------------------------------

@event.listens_for(Session, "after_flush")
def _note_flushed(session: Session, _context) -> None:
    # after_flush still shows the flush's new, dirty and deleted objects and their history
    for obj in session.deleted:
        if isinstance(obj, _TABLES):
            note(session, _CHANGED, ALL)
    for obj in chain(session.new, session.dirty):
        if isinstance(obj, Submission):
            if obj in session.new and obj.status in (Status.QUEUED, None):
                continue  # new work waits: on no board yet
            if obj in session.new or changed_columns(obj) & SUBMISSION_COLUMNS:
                note(session, _CHANGED, obj.exercise)
        elif isinstance(obj, GradeRun) and obj in session.new:
            owner = session.identity_map.get(identity_key(Submission, obj.submission_id))
            note(session, _CHANGED, owner.exercise if owner is not None else ALL)
        elif isinstance(obj, User) and obj not in session.new:
            if changed_columns(obj) & USER_COLUMNS:
                note(session, _CHANGED, ALL)


# a bulk write whose rows are not known clears every board, unless it says it leaves
# every board as it is (a claim, a release, a requeue)
note_bulk_writes(_CHANGED, ALL, _TABLES, unless="board_neutral")
share(_CHANGED, changed)  # on this process's commits, and on every other process's
