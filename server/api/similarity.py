"""The instructor's similarity reports through the API: start a run over an exercise's
files, read its report. Runs are computed apart (server/similarity/)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from sqlalchemy.orm import Session

from ..auth.deps import exercise_or_error, get_db, instructor
from ..similarity import reports as similarity
from ..similarity.reports import skeletons_of

router = APIRouter(prefix="/api/admin", tags=["admin"], dependencies=[Depends(instructor)])


@router.post("/similarity/{exercise}", status_code=202)
def start_similarity(exercise: str, request: Request, db: Session = Depends(get_db, scope="function")):
    """Starts a run over the exercise's latest submission of each student (or returns the
    one still running); the report is read with GET."""
    info = exercise_or_error(request, exercise)
    report = similarity.start(db, info.name, request.app.state.settings.database_url,
                              skeletons_of(info))
    return similarity.to_json(report)


@router.get("/similarity/{exercise}")
def get_similarity(exercise: str, request: Request, db: Session = Depends(get_db, scope="function")):
    info = exercise_or_error(request, exercise)
    report = similarity.latest(db, info.name)
    if report is None:
        raise HTTPException(404, f"no similarity report for {info.name} yet: POST to start one")
    return similarity.to_json(report)
