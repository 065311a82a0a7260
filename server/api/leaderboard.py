"""The leaderboard: each student's best graded submission; never any source."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session

from ..auth import get_db
from ..services import leaderboard as entries_of
from .common import exercise_or_error

router = APIRouter(prefix="/api/leaderboard", tags=["leaderboard"])


@router.get("/{exercise}")
def leaderboard(exercise: str, request: Request, db: Session = Depends(get_db)):
    exercise_or_error(request, exercise)
    return {"exercise": exercise, "entries": [entry for _, entry in entries_of(db, exercise)]}
