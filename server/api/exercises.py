from __future__ import annotations

from fastapi import APIRouter, Request

from .common import exercise_or_error

router = APIRouter(prefix="/api/exercises", tags=["exercises"])


def _deadline(request: Request, name: str, default: str | None) -> str | None:
    override = request.app.state.settings.deadlines.get(name)
    return override.isoformat() if override else default


@router.get("")
def list_exercises(request: Request):
    return {"exercises": [
        {"name": e.name, "title": e.title, "summary": e.summary, "languages": e.languages,
         "deadline": _deadline(request, e.name, e.deadline)}
        for e in request.app.state.exercises.values()]}


@router.get("/{name}")
def get_exercise(name: str, request: Request):
    e = exercise_or_error(request, name)
    return {"name": e.name, "title": e.title, "summary": e.summary, "languages": e.languages,
            "entry_points": e.entry_points, "deadline": _deadline(request, e.name, e.deadline),
            "statement": e.statement, "skeletons": e.skeletons, "checks": e.checks}
