"""Who leads: each student's counted submission under the course's late policy, ranked;
the same on the leaderboard, in the API and in the CSV. Read through the board cache
(server/domain/board_cache.py), which keeps a board until something on it changes."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .formatting import iso
from .models import Flag, GradeRun, Role, Submission, User
from .submissions import on_the_board, scored

# How late work counts (LATE_POLICY), the same on the leaderboard, in the API and the CSV.
LATE_POLICIES = {
    "on_time_first": "late work counts only for a student with nothing on time, and ranks "
                     "after all on-time work",
    "best_counts": "late work counts like on-time work (marked late)",
    "on_time_only": "late work is graded and shown to its student, but never counts",
}


def _order(columns, policy: str) -> tuple:
    """Best first: on-time work before late under on_time_first, then the higher score,
    then the earlier submission."""
    best = (columns.score.desc(), columns.created_at, columns.id)
    return (columns.late, *best) if policy == "on_time_first" else best


def _ranked(exercise: str, policy: str):
    """Each student's counted submissions, numbered best first (``place`` 1 counts): read by
    the board's index, never a source. Flagged submissions never count, nor unscored ones."""
    counted = [Submission.exercise == exercise, on_the_board(), User.role == Role.STUDENT,
               Submission.flag == Flag.NONE, scored()]
    if policy == "on_time_only":
        counted.append(Submission.late.is_(False))
    return (select(Submission.id, Submission.user_id, Submission.score, Submission.late,
                   Submission.created_at,
                   func.row_number().over(partition_by=Submission.user_id,
                                          order_by=_order(Submission, policy)).label("place"))
            .join(User, Submission.user_id == User.id).where(*counted).subquery())


def compute_leaderboard(db: Session, exercise: str, policy: str) -> list[tuple[int, dict]]:
    """(user id, entry) per student: each one's counted submission; never any source.
    Read through server/domain/board_cache.py, which keeps it until something on it changes."""
    # one row per student, and only the columns the board shows
    ranked = _ranked(exercise, policy)
    rows = db.execute(select(ranked, User.display_name)
                      .join(User, User.id == ranked.c.user_id).where(ranked.c.place == 1)
                      .order_by(*_order(ranked.c, policy))).all()
    latest: dict[int, dict] = {}
    if rows:  # the newest grading of each best submission holds its speed figures
        for sid, result in db.execute(select(GradeRun.submission_id, GradeRun.result)
                                      .where(GradeRun.submission_id.in_([r.id for r in rows]))
                                      .order_by(GradeRun.id)):
            latest[sid] = result or {}
    entries = []
    for rank, row in enumerate(rows, start=1):
        result = latest.get(row.id, {})
        perf = result.get("performance") or {}
        entries.append((row.user_id, {
            "rank": rank, "display_name": row.display_name, "score": row.score,
            "fraction_of_copy": perf.get("fraction_of_copy"), "gbs": perf.get("gbs"),
            "device": result.get("device_name") or result.get("device"),
            "late": row.late, "submitted_at": iso(row.created_at)}))
    return entries


def best_per_student(db: Session, exercise: str, policy: str) -> dict[int, Submission]:
    """Each student's counted submission (user id -> it), by the late policy; flagged
    ones left out."""
    ranked = _ranked(exercise, policy)
    return {s.user_id: s for s in db.scalars(
        select(Submission).join(ranked, ranked.c.id == Submission.id)
        .where(ranked.c.place == 1))}


def counted_score(db: Session, exercise: str, policy: str, user_id: int) -> float | None:
    """One student's counted score (their leaderboard and CSV score), None while nothing
    of theirs counts: what the LMS's gradebook is sent (server/lti/grades.py)."""
    ranked = _ranked(exercise, policy)
    return db.scalar(select(ranked.c.score).where(ranked.c.user_id == user_id,
                                                  ranked.c.place == 1))


def flagged_per_student(db: Session, exercise: str) -> dict[int, list[Submission]]:
    """The flagged submissions of each student: the CSV names them, so that a grade below
    a student's best is explained."""
    flagged: dict[int, list[Submission]] = {}
    for s in db.scalars(select(Submission).where(Submission.exercise == exercise,
                                                 Submission.flag != Flag.NONE)
                        .order_by(Submission.id)):
        flagged.setdefault(s.user_id, []).append(s)
    return flagged


def not_scored_per_student(db: Session, exercise: str) -> dict[int, list[Submission]]:
    """The graded submissions of each student that have no score (HIP only compiled,
    without a GPU): the CSV names them, so that such work is not read as a 0 or missed."""
    unscored: dict[int, list[Submission]] = {}
    for s in db.scalars(select(Submission).where(Submission.exercise == exercise,
                                                 ~scored(), on_the_board())
                        .order_by(Submission.id)):
        unscored.setdefault(s.user_id, []).append(s)
    return unscored
