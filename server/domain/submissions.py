"""Submissions: accepted (validated, limited, committed before anyone is told), queried
with the instructor's filters, and queued again for a regrade."""

from __future__ import annotations

import logging
from pathlib import PurePath

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX

from ..core import metrics
from ..core.settings import Settings
from . import admission
from .admission import Refused, check_room, first_tried
from .deadlines import deadline_for, is_late
from .exercises import ExerciseInfo
from .filenames import stored_name
from .formatting import NOT_SCORED
from .models import Flag, Role, Status, Submission, User
from .validation import nul_line

log = logging.getLogger("server.submissions")


def accept_submission(db: Session, settings: Settings, exercises: dict[str, ExerciseInfo],
                      user: User, exercise_name: str, language: str | None, filename: str,
                      raw: str | bytes, uploaded: bool = False) -> Submission:
    """Validate, apply the limits, and commit: the row exists before anyone is told so.

    `uploaded`: the source came as a file (the API's multipart, the page's file picker),
    whose name must say it is a source file, whatever language was picked beside it."""
    try:
        if uploaded:
            check_upload_name(filename)
        return _accept(db, settings, exercises, user, exercise_name, language, filename, raw)
    except Refused as refused:
        metrics.REFUSALS.labels(refused.reason).inc()
        raise


def check_upload_name(filename: str) -> None:
    """An uploaded file is taken only under a source file's name: a notes.txt sent with the
    picker on Triton was stored, graded (NameError) and counted against the hour's limit.
    One wording for the API and the page (tests/test_submit_form.py holds them together)."""
    suffix = PurePath(filename).suffix.lower()
    if suffix == ".ipynb":
        raise Refused(422, f"{filename!r} is a Jupyter notebook, not a source file: export "
                           "your kernel's code as a .py file (in Jupyter: File, then Save and "
                           "Export Notebook As, then Executable Script) and send that")
    # no suffix at all (a pipe: curl -F file=@-) is left to `language`, as JSON's source is
    if suffix and suffix not in LANGUAGE_BY_SUFFIX:
        raise Refused(422, _unknown_kind(filename))


def _unknown_kind(filename: str) -> str:
    return (f"cannot tell the language of {filename!r}: name it .py (Triton) or .cpp/.hip "
            "(HIP)")


def _accept(db: Session, settings: Settings, exercises: dict[str, ExerciseInfo], user: User,
            exercise_name: str, language: str | None, filename: str,
            raw: str | bytes) -> Submission:
    exercise = exercises.get(exercise_name)
    if exercise is None:
        raise Refused(422, f"unknown exercise {exercise_name!r} (known: {', '.join(exercises)})")
    if not language:
        language = LANGUAGE_BY_SUFFIX.get(PurePath(filename).suffix.lower())
        if language is None:
            raise Refused(422, f"{_unknown_kind(filename)}, or send `language`")
    if language not in exercise.languages:
        raise Refused(422, f"{exercise.name} accepts {', '.join(exercise.languages)}, "
                           f"not {language!r}")
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) > settings.max_source_bytes:
        raise Refused(413, f"the source is {len(data)} bytes; the limit is "
                           f"{settings.max_source_bytes} bytes")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(422, f"the source is not UTF-8 text (byte {exc.start})") from None
    if not source.strip():
        raise Refused(422, "the source is empty")
    if "\x00" in source:  # no compiler reads one, and PostgreSQL cannot store one
        raise Refused(422, f"the source holds a NUL character{nul_line(source)}: a kernel's "
                           "source is text")

    at = admission.now()  # one clock for admission (tests move it)
    # room for it now? A refusal is recorded: the student's retry is judged by this time
    check_room(db, settings, user, exercise.name, at, limit_student=user.role is Role.STUDENT)
    tried = first_tried(db, settings, user, exercise.name, at)

    deadline = deadline_for(db, settings, exercise, user).at  # an extension counts
    filename = stored_name(filename)  # no control characters: it goes into headers
    submission = Submission(user_id=user.id, exercise=exercise.name, language=language,
                            filename=filename, source=source,
                            status=Status.QUEUED, attempts=0, created_at=at,
                            first_tried_at=tried if tried < at else None,
                            late=is_late(tried, deadline))
    db.add(submission)
    db.commit()
    log.info("submission=%d user=%s exercise=%s language=%s queued", submission.id,
             user.username, exercise.name, language)
    return submission


def submissions_query(exercise: str = "", student: str = "", verdict: str = "", status: str = "",
                      flag: str = ""):
    """Every submission, newest first, narrowed by the instructor's filters."""
    query = select(Submission).join(User, Submission.user_id == User.id)
    if exercise:
        query = query.where(Submission.exercise == exercise)
    if student:
        query = query.where(User.username == student)
    if verdict:
        query = query.where(Submission.verdict == verdict)
    if status:
        query = query.where(Submission.status == Status(status))
    if flag:
        query = query.where(Submission.flag == Flag(flag))
    return query.order_by(Submission.id.desc())


def requeue(db: Session, submission_id: int | None = None, exercise: str | None = None) -> int:
    """Grade again (after a grader fix); the new result will sit beside the old one.

    A graded submission keeps its grade, on the board and in the CSV, until the new one is
    stored; it waits as a regrade, which the queue takes turn about with students' new work
    and which no student's cap counts. One that ended in `error` has no grade: it is queued."""
    def scope(query):
        return query.where(Submission.id == submission_id) if submission_id is not None else \
            query.where(Submission.exercise == exercise)

    # board_neutral: a grade waiting for its regrade stays on the board as it was, and
    # work in `error` is on no board, waiting or not (server/domain/board_cache.py)
    count = db.execute(scope(update(Submission).where(Submission.status == Status.GRADED))
                       .values(regrade_pending=True, attempts=0)
                       .execution_options(board_neutral=True)).rowcount
    count += db.execute(scope(update(Submission).where(Submission.status == Status.ERROR))
                        .values(status=Status.QUEUED, attempts=0, started_at=None)
                        .execution_options(board_neutral=True)).rowcount
    db.commit()
    return count


def on_the_board():
    """A submission whose grade counts: graded, or graded and being graded again."""
    return (Submission.status == Status.GRADED) | (
        (Submission.status == Status.RUNNING) & Submission.regrade_pending)


def scored():
    """A grade that is a score: not a verdict that gives none (HIP only compiled)."""
    return or_(Submission.verdict.is_(None), Submission.verdict.not_in(sorted(NOT_SCORED)))
