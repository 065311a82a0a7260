"""Each student's deadline for each exercise: the course's, or a later one granted to that
student alone (an extension, issue 15).

`deadline_for` decides it for every reader: the `late` flag set when a submission is
created, the API's exercise view, the pages, and the grades CSV. The leaderboard and the
CSV's counted submission read only the `late` flag, so they follow it too.

The rules, said once here and in the README:
- An extension only ever moves a deadline later. A student's deadline is the later of the
  course's and their extension's, so an extension granted before the course deadline was
  moved later never shortens it; granting one that is not later than the course deadline
  is refused (it would do nothing, and is most likely a typing slip).
- An exercise with no course deadline has none for anyone: there is nothing to extend.
- Granting, replacing or removing an extension re-marks that student's submissions to that
  exercise against their new deadline. Without that, the board and the CSV (which read the
  stored flag) would still call late what the new deadline makes on time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..core.clock import as_utc, utcnow
from ..core.settings import Settings
from .exercises import ExerciseInfo
from .formatting import readable
from .models import USERNAME_PATTERN, Extension, Role, Submission, User

NOTE_MAX = 200  # the column's width
# a username no roster accepts names no student, and is not sent to the database
# (PostgreSQL refuses a NUL in text with an error, not an empty answer)
USERNAME = re.compile(USERNAME_PATTERN)


@dataclass
class Unaccepted(Exception):
    """An extension the server will not grant or remove, with the HTTP status that says why."""

    status: int
    detail: str
    page_detail: str = ""  # the same as a page says it, when it names a time (readable())

    def on_page(self) -> str:
        return self.page_detail or self.detail


@dataclass(frozen=True)
class StudentDeadline:
    at: datetime | None  # the deadline that applies to this student (UTC), or none
    course: datetime | None  # everyone's
    extension: Extension | None  # this student's, when it is what moved `at` later

    @property
    def extended(self) -> bool:
        return self.extension is not None


def deadline_of(settings: Settings, exercise: ExerciseInfo) -> datetime | None:
    """The course deadline: DEADLINES overrides the exercise's spec."""
    deadline = settings.deadlines.get(exercise.name) or (
        datetime.fromisoformat(exercise.deadline) if exercise.deadline else None)
    return as_utc(deadline) if deadline else None


def applying(course: datetime | None, extension: Extension | None) -> StudentDeadline:
    """The later of the course deadline and an extension; no course deadline, no deadline."""
    if course is None or extension is None or as_utc(extension.deadline) <= course:
        return StudentDeadline(course, course, None)
    return StudentDeadline(as_utc(extension.deadline), course, extension)


def _extension(db: Session, user_id: int, exercise: str) -> Extension | None:
    return db.scalar(select(Extension).where(Extension.user_id == user_id,
                                             Extension.exercise == exercise))


def deadline_for(db: Session, settings: Settings, exercise: ExerciseInfo,
                 user: User | None) -> StudentDeadline:
    """This student's deadline for this exercise (anyone else, or nobody: the course's)."""
    course = deadline_of(settings, exercise)
    return applying(course, _extension(db, user.id, exercise.name) if user and course else None)


def deadlines_for(db: Session, settings: Settings, user: User | None
                  ) -> Callable[[ExerciseInfo], StudentDeadline]:
    """``deadline_for`` of one reader for any exercise, their extensions read in one query:
    for the lists that show every exercise at once."""
    granted = extensions_by_student(db, user.id) if user else {}
    return lambda exercise: applying(deadline_of(settings, exercise),
                                     granted.get((user.id, exercise.name)) if user else None)


def is_late(at: datetime, deadline: datetime | None) -> bool:
    """Submitted after the deadline that applies (none: never late)."""
    return bool(deadline and at > deadline)


def extensions_by_student(db: Session, user_id: int | None = None
                          ) -> dict[tuple[int, str], Extension]:
    """Every extension (or one student's), by (user id, exercise): for pages and the CSV
    that show many deadlines at once, read in one query."""
    query = select(Extension)
    if user_id is not None:
        query = query.where(Extension.user_id == user_id)
    return {(e.user_id, e.exercise): e for e in db.scalars(query)}


def all_extensions(db: Session, settings: Settings, exercises: dict[str, ExerciseInfo],
                   exercise: str = "", student: str = ""
                   ) -> list[tuple[Extension, datetime | None]]:
    """Every extension (narrowed by exercise and student), each beside its course deadline."""
    query = select(Extension).join(User, Extension.user_id == User.id)
    if exercise:
        query = query.where(Extension.exercise == exercise)
    if student:
        query = query.where(User.username == student)
    return [(e, deadline_of(settings, exercises[e.exercise]) if e.exercise in exercises
             else None) for e in db.scalars(query.order_by(Extension.exercise, User.username))]


def parse_deadline(text: str, assume_utc: bool) -> datetime:
    """ISO 8601. The API requires a timezone (a bare time is read differently by each
    person who types one); the page's field is labelled UTC and says so by ``assume_utc``."""
    try:
        value = datetime.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        raise Unaccepted(422, f"the deadline {text!r} is not an ISO 8601 time, such as "
                              "2026-12-20T23:59:00+00:00") from None
    if value.tzinfo is None:
        if not assume_utc:
            raise Unaccepted(422, f"the deadline {text!r} has no timezone: add one, such as "
                                  "2026-12-20T23:59:00+00:00 (or Z for UTC)")
        value = as_utc(value)
    return value.astimezone(timezone.utc)


def _student(db: Session, username: str) -> User:
    user = db.scalar(select(User).where(User.username == username, User.role == Role.STUDENT)) \
        if USERNAME.fullmatch(username) else None
    if user is None:
        raise Unaccepted(404, f"no student {username!r} on the roster")
    return user


def _exercise(exercises: dict[str, ExerciseInfo], name: str) -> ExerciseInfo:
    if name not in exercises:
        raise Unaccepted(404, f"unknown exercise {name!r} (known: {', '.join(exercises)})")
    return exercises[name]


def remark(db: Session, user_id: int, exercise: str, deadline: datetime | None) -> int:
    """Set `late` on a student's submissions to one exercise by ``deadline``; how many
    changed. The caller commits."""
    changed = 0
    for s in db.scalars(select(Submission).where(Submission.user_id == user_id,
                                                 Submission.exercise == exercise)):
        # judged by when it was first tried (a refused try's time), as when it came in
        late = is_late(as_utc(s.first_tried_at or s.created_at), deadline)
        if s.late != late:
            s.late, changed = late, changed + 1
    return changed


def _not_later(course: str) -> str:
    return (f"an extension must be later than the course deadline ({course}); to take one "
            "back, remove it")


def grant(db: Session, settings: Settings, exercises: dict[str, ExerciseInfo], username: str,
          exercise_name: str, deadline: datetime, note: str, by: User) -> tuple[Extension, int]:
    """Give (or replace) one student's extension; re-mark their submissions. Returns it and
    how many submissions changed their `late` mark."""
    user, exercise = _student(db, username), _exercise(exercises, exercise_name)
    if len(note) > NOTE_MAX:
        raise Unaccepted(422, f"the note is {len(note)} characters; at most {NOTE_MAX}")
    if "\x00" in note:
        raise Unaccepted(422, "the note holds a NUL character")
    course = deadline_of(settings, exercise)
    if course is None:
        raise Unaccepted(422, f"{exercise.name} has no deadline: there is nothing to extend")
    if deadline <= course:
        # the API names the time as it takes times (ISO 8601); the page as it shows them
        raise Unaccepted(422, _not_later(course.isoformat()), _not_later(readable(course)))
    fields = {"deadline": deadline, "note": note, "granted_by": by.id, "granted_at": utcnow()}
    for attempt in (1, 2):  # a grant racing another for the same student inserts once
        extension = _extension(db, user.id, exercise.name)
        if extension is None:
            extension = Extension(user_id=user.id, exercise=exercise.name, **fields)
            db.add(extension)
        else:
            for key, value in fields.items():
                setattr(extension, key, value)
        try:
            db.flush()
            break
        except IntegrityError:
            db.rollback()
            if attempt == 2:
                raise
    changed = remark(db, user.id, exercise.name, deadline)
    db.commit()
    return extension, changed


def revoke(db: Session, settings: Settings, exercises: dict[str, ExerciseInfo], username: str,
           exercise_name: str) -> int:
    """Remove one student's extension; re-mark their submissions against the course
    deadline. Returns how many changed their `late` mark."""
    user, exercise = _student(db, username), _exercise(exercises, exercise_name)
    extension = _extension(db, user.id, exercise.name)
    if extension is None:
        raise Unaccepted(404, f"{username} has no extension for {exercise.name}")
    db.delete(extension)
    changed = remark(db, user.id, exercise.name, deadline_of(settings, exercise))
    db.commit()
    return changed

