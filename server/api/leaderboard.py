"""The leaderboard: each student's best graded submission; never any source."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..auth import get_db
from ..models import Flag, Role, Status, Submission, User
from .common import exercise_or_error, iso

router = APIRouter(prefix="/api/leaderboard", tags=["leaderboard"])


def best_per_student(db: Session, exercise: str, include_hidden: bool = False
                     ) -> list[tuple[User, Submission]]:
    """Best score per student, ties to the earlier submission; flagged ones left out."""
    query = (select(Submission, User).join(User, Submission.user_id == User.id)
             .where(Submission.exercise == exercise, Submission.status == Status.GRADED,
                    User.role == Role.STUDENT)
             .order_by(Submission.score.desc(), Submission.created_at, Submission.id))
    if not include_hidden:
        query = query.where(Submission.flag == Flag.NONE)
    best: dict[int, tuple[User, Submission]] = {}
    for submission, user in db.execute(query):
        best.setdefault(user.id, (user, submission))
    return list(best.values())


@router.get("/{exercise}")
def leaderboard(exercise: str, request: Request, db: Session = Depends(get_db)):
    exercise_or_error(request, exercise)
    entries = []
    for rank, (user, s) in enumerate(best_per_student(db, exercise), start=1):
        result = s.results[-1].result if s.results else {}
        perf = result.get("performance") or {}
        entries.append({
            "rank": rank, "display_name": user.display_name, "score": s.score,
            "fraction_of_copy": perf.get("fraction_of_copy"), "gbs": perf.get("gbs"),
            "device": result.get("device_name") or result.get("device"),
            "late": s.late, "submitted_at": iso(s.created_at)})
    return {"exercise": exercise, "entries": entries}
