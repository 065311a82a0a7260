"""The leaderboard: each student's best graded submission; never any source."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from ..auth import get_db
from ..services import leaderboard_json
from .common import exercise_or_error

router = APIRouter(prefix="/api/leaderboard", tags=["leaderboard"])


@router.get("/{exercise}")
def leaderboard(exercise: str, request: Request, db: Session = Depends(get_db, scope="function")):
    """{"exercise", "late_policy", "late_policy_says", "entries": [{"rank", "display_name",
    "score", "fraction_of_copy", "gbs", "device", "late", "submitted_at"}]}: read once per
    change, then served as it is. LATE_POLICY decides which submission counts."""
    exercise_or_error(request, exercise)
    policy = request.app.state.settings.late_policy
    return Response(leaderboard_json(db, exercise, policy), media_type="application/json")
