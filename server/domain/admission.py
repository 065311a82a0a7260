"""Whether a student's submission is taken now, and the time that decides `late`.

At a deadline (500 students, 3 exercises, 20 tries each in the last hour) refusals are
certain: a student's previous submission to the exercise is still being graded, their
hour's tries are spent, or the queue is at its bound. Before issue 27 `late` was stamped
when a submission was accepted, so every refusal near the deadline became a late mark when
the student tried again. Now:

- **A refusal for want of room is recorded** (``refused_tries``: who, which exercise, when;
  one outstanding per student and exercise, so hammering stores nothing more).
- **The next accepted submission of that exercise is judged by the first refusal's time**
  when it comes within ``REFUSAL_HOLDS_S`` of it (``first_tried_at``); the refusal is then
  used up. Work handed in long after a refusal is judged by its own time.
- **Limits count per exercise**: one submission in flight per student and exercise, and
  SUBMISSIONS_PER_HOUR tries per student and exercise; a submission that ended in `error`
  (the graders' fault) does not count.

A refusal for the file itself (unknown exercise, not UTF-8, too large) holds nothing: that
work was not ready to be handed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ..core.clock import as_utc
from .models import RefusedTry, Status, Submission, User

ROOM_REASONS = ("in_flight", "per_hour", "queue_full")


@dataclass
class Refused(Exception):
    """A submission the server will not take, with the HTTP status that says why."""

    status: int
    detail: str
    headers: dict[str, str] = field(default_factory=dict)
    in_flight: int | None = None  # the student's submission still being graded, if that is why
    reason: str = "invalid"  # in_flight | per_hour | queue_full | invalid (for /metrics)


def now() -> datetime:
    """The server's clock for admission (one place, so that tests can move it)."""
    return datetime.now(timezone.utc)


def retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def queue_depth(db: Session) -> int:
    """Submissions waiting, all students together (MAX_QUEUE_DEPTH bounds them)."""
    return db.scalar(select(func.count()).where(Submission.status == Status.QUEUED)) or 0


def own_work_in_flight():
    """A student's own work still to be graded (a regrade is the instructor's)."""
    return (Submission.status == Status.QUEUED) | (
        (Submission.status == Status.RUNNING) & ~Submission.regrade_pending)


def check_room(db: Session, settings, user: User, exercise: str, at: datetime,
               limit_student: bool) -> None:
    """Raise ``Refused`` (recorded as this student's try, committed) when there is no room
    for another submission of ``exercise`` now."""
    try:
        if limit_student:
            _student_limits(db, settings, user, exercise, at)
        if queue_depth(db) >= settings.max_queue_depth:
            raise Refused(503, "the grading queue is full: try again shortly", retry_after(30),
                          reason="queue_full")
    except Refused as refused:
        _record(db, user, exercise, at, refused.reason, settings.refusal_holds_s)
        refused.detail += (f". This try is recorded: submit {exercise} again within "
                           f"{settings.refusal_holds_s / 60:g} minutes and its deadline is "
                           "judged by this try's time, not the later one")
        raise


def _student_limits(db: Session, settings, user: User, exercise: str, at: datetime) -> None:
    mine = (Submission.user_id == user.id) & (Submission.exercise == exercise)
    in_flight = db.scalars(select(Submission.id).where(mine, own_work_in_flight())
                           .order_by(Submission.id.desc())).all()  # the newest first: to link
    if len(in_flight) >= settings.max_in_flight_per_student:
        raise Refused(429, f"you already have a {exercise} submission being graded: wait for "
                           f"it to finish (submission {in_flight[0]})", retry_after(10),
                      in_flight=in_flight[0], reason="in_flight")
    # an `error` is the graders' failure, not a try of the student's
    recent = db.scalars(select(Submission.created_at).where(
        mine, Submission.status != Status.ERROR, Submission.created_at > at - timedelta(hours=1))
        .order_by(Submission.created_at)).all()
    if len(recent) >= settings.submissions_per_hour:
        wait = (as_utc(recent[0]) + timedelta(hours=1) - at).total_seconds()
        raise Refused(429, f"at most {settings.submissions_per_hour} submissions of {exercise} "
                           "an hour", retry_after(wait), reason="per_hour")


def _record(db: Session, user: User, exercise: str, at: datetime, reason: str,
            holds_s: float) -> None:
    """The student's first refused try stands; later ones add nothing while it holds."""
    held = db.scalar(select(func.count()).where(
        RefusedTry.user_id == user.id, RefusedTry.exercise == exercise,
        RefusedTry.at > at - timedelta(seconds=holds_s)))
    if not held:
        db.add(RefusedTry(user_id=user.id, exercise=exercise, at=at, reason=reason))
        db.commit()


def first_tried(db: Session, settings, user: User, exercise: str, at: datetime) -> datetime:
    """When this submission was first tried: the student's first refused try of the exercise
    within ``refusal_holds_s``, else now. Uses the refusals up (in the caller's
    transaction, committed with the submission)."""
    since = at - timedelta(seconds=settings.refusal_holds_s)
    first = db.scalar(select(func.min(RefusedTry.at)).where(
        RefusedTry.user_id == user.id, RefusedTry.exercise == exercise, RefusedTry.at > since))
    db.execute(delete(RefusedTry).where(RefusedTry.user_id == user.id,
                                        RefusedTry.exercise == exercise))
    return min(as_utc(first), at) if first is not None else at
