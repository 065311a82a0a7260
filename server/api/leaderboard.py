"""The leaderboard: each student's best graded submission; never any source."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from ..auth.deps import exercise_or_error
from ..domain import board_cache as boards

router = APIRouter(prefix="/api/leaderboard", tags=["leaderboard"])


@router.get("/{exercise}")
async def leaderboard(exercise: str, request: Request):
    """{"exercise", "late_policy", "late_policy_says", "entries": [{"rank", "display_name",
    "score", "fraction_of_copy", "gbs", "device", "late", "submitted_at"}]}: computed once
    per change, then served as it is, with an ETag (send it back as If-None-Match: 304 while
    nothing changed). LATE_POLICY decides which submission counts."""
    exercise_or_error(request, exercise)
    policy = request.app.state.settings.late_policy
    # a fresh board is served from here, on the event loop: no thread, no database session
    snapshot = boards.cached(exercise, policy) or \
        await run_in_threadpool(boards.board, request.app.state.sessionmaker, exercise, policy)
    headers = {"ETag": snapshot.etag, "Cache-Control": "no-cache"}  # revalidate each time
    if snapshot.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(snapshot.json, media_type="application/json", headers=headers)
