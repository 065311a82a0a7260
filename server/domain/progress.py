"""What a student sees while waiting: the queue ahead of them, and each check as it ends.

Checks arrive from the slot's ``graders worker`` (its ``{"id", "check"}`` lines) or from a
remote worker (``/internal/tasks/…/progress``) and are kept on the submission's row
(``checks_done``) while it runs, so that any server process shows them (issue 27); a claim,
a release and a stored result clear them.

A change a page shows is published when its transaction commits (issue 39), so that an open
progress stream reads the database only when woken (server/api/events.py), never on a
clock: a submission's own change wakes the streams of its bucket (``progress_key``), one
that moves the queue wakes every queued submission's (``QUEUE``), and a bulk update whose
rows are not known (a claim, a release, a requeue) wakes every stream. Another server
process's commits arrive through the change stamps, within about a second.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import event, func, select
from sqlalchemy.orm import Session, sessionmaker

from ..core.change_feed import EVERY, ChangeFeed
from ..core.clock import as_utc, utcnow
from ..core.commit_hooks import changed_columns, note, note_bulk_writes
from ..core.shared_state import share
from .models import Status, Submission

FEED = ChangeFeed()  # the progress streams of this process wait here
QUEUE = "queue"  # a submission left the queue: every queued one has moved up
BUCKETS = 64  # streams share a key by submission id modulo this: at most 64 stamp rows
# what a progress stream shows of a submission; a change to anything else wakes nobody
SHOWN_COLUMNS = frozenset({"status", "checks_done", "attempts", "started_at"})
_CHANGED = "progress_changed"  # a session's pending keys, in session.info


def progress_key(submission_id: int) -> str:
    return str(submission_id % BUCKETS)


def shown(check: dict[str, Any]) -> dict[str, Any]:
    """What a page shows of a check: never more than its name and points."""
    return {"name": str(check.get("name", ""))[:64], "passed": bool(check.get("passed")),
            "points": check.get("points"), "max_points": check.get("max_points")}


def add_check(s: Submission, check: dict[str, Any]) -> None:
    """Append a check to a running submission's progress (its row locked by the caller)."""
    s.checks_done = [*(s.checks_done or []), shown(check)]


def record_check(sessions: sessionmaker[Session], submission_id: int, attempt: int,
                 check: dict[str, Any]) -> None:
    """A check of a local grading ended: kept while this attempt still runs."""
    with sessions.begin() as db:
        s = db.get(Submission, submission_id, with_for_update=True)
        if s is not None and s.status is Status.RUNNING and s.attempts == attempt:
            add_check(s, check)


def progress_of(request, db: Session, s: Submission) -> dict[str, Any] | None:
    """For a queued or running submission (else None): its place in the queue (1 = next),
    how long it has waited or run, and the checks done so far, of how many."""
    if s.status not in (Status.QUEUED, Status.RUNNING):
        return None
    now = utcnow()

    def since(value: datetime | None) -> float | None:
        if value is None:
            return None
        return round(max((now - as_utc(value)).total_seconds(), 0.0), 1)

    out: dict[str, Any] = {"queue_position": None, "waiting_s": since(s.created_at),
                           "running_s": None, "checks": [],
                           "checks_total": _checks_total(request, s)}
    if s.status is Status.QUEUED:
        out["queue_position"] = 1 + (db.scalar(select(func.count()).where(
            Submission.status == Status.QUEUED, Submission.id < s.id)) or 0)
    elif s.status is Status.RUNNING:
        out["running_s"] = since(s.started_at)
        out["checks"] = list(s.checks_done or [])
    return out


def _checks_total(request, s: Submission) -> int | None:
    """How many checks the submission's exercise runs in its language (for "5 of 8")."""
    exercise = request.app.state.exercises.get(s.exercise)
    if exercise is None:
        return None
    return sum(1 for c in exercise.checks if s.language in c.get("languages", [s.language]))


# -- what a commit changed ------------------------------------------------------------------

@event.listens_for(Session, "after_flush")
def _note_flushed(session: Session, _context) -> None:
    for obj in session.dirty:
        if isinstance(obj, Submission):
            changed = changed_columns(obj) & SHOWN_COLUMNS
            if changed:
                note(session, _CHANGED, progress_key(obj.id))
            if "status" in changed:  # it may have left the queue
                note(session, _CHANGED, QUEUE)
    for obj in session.deleted:
        if isinstance(obj, Submission):
            note(session, _CHANGED, EVERY)


# a bulk write whose rows are not known wakes every stream, unless it says it changes
# nothing a stream shows (a heartbeat, say)
note_bulk_writes(_CHANGED, EVERY, (Submission,), unless="progress_neutral")


# here at the commit, and in every other server process within about a second
share(_CHANGED, FEED.publish)
