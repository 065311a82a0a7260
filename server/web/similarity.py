"""The instructor's similarity pages (issue 30): an exercise's report, pairs ranked, most
similar first; a pair side by side with the matching regions marked; one button that
flags both submissions `suspicious`. Runs are computed apart (server/similarity/reports.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from markupsafe import Markup, escape
from sqlalchemy.orm import Session

from ..auth import csrf
from ..auth.deps import DbId, exercise_or_error, get_db
from ..domain.models import Flag, Submission, User
from ..domain.validation import MAX_ID
from ..similarity import reports as similarity
from ..similarity.reports import skeletons_of
from .guards import instructor_page
from .render import render

router = APIRouter(include_in_schema=False)


@router.get("/admin/similarity/{exercise}", response_class=HTMLResponse)
def similarity_page(exercise: str, request: Request, user: User = Depends(instructor_page),
                    db: Session = Depends(get_db, scope="function")):
    info = exercise_or_error(request, exercise)
    report = similarity.latest(db, info.name)
    return render(request, "similarity.html", user, exercise=info.name, report=report,
                  running=similarity.running(report), pairs=(report.pairs or []) if report else [],
                  flagged_at=similarity.FLAGGED, listed_from=similarity.FLOOR)


@router.post("/admin/similarity/{exercise}", dependencies=[Depends(csrf.check_form)])
def similarity_start(exercise: str, request: Request, user: User = Depends(instructor_page),
                     db: Session = Depends(get_db, scope="function")):
    info = exercise_or_error(request, exercise)
    similarity.start(db, info.name, request.app.state.settings.database_url, skeletons_of(info))
    return RedirectResponse(f"/admin/similarity/{info.name}", status_code=303)


def _pair_of(db: Session, exercise: str, a: int, b: int) -> tuple[dict, Submission, Submission]:
    report = similarity.latest(db, exercise)
    pair = next((p for p in (report.pairs or []) if p["a"] == a and p["b"] == b), None) \
        if report else None
    first, second = db.get(Submission, a), db.get(Submission, b)
    if pair is None or first is None or second is None:
        raise HTTPException(404, f"no pair {a} and {b} in {exercise}'s latest similarity report")
    return pair, first, second


def marked(source: str, spans: list[list[int]]) -> Markup:
    """The source, escaped, with each matching span inside <mark>; line numbers kept. A
    span over several lines is marked line by line, so that no mark crosses a line break
    and every line can carry its number."""
    out, at = [], 0
    for start, end in sorted((max(0, s), min(len(source), e)) for s, e in spans):
        start = max(start, at)  # an overlap (a report stored before spans were merged)
        if start >= end:
            continue
        out.append(escape(source[at:start]))
        out.append(Markup("\n").join(Markup("<mark>%s</mark>") % piece if piece else Markup("")
                                      for piece in source[start:end].split("\n")))
        at = end
    out.append(escape(source[at:]))
    lines = Markup("").join(out).split("\n")
    return Markup("\n").join(Markup('<span class="ln">%d</span>') % number + Markup(line)
                             for number, line in enumerate(lines, 1))


@router.get("/admin/similarity/{exercise}/pair/{a}/{b}", response_class=HTMLResponse)
def similarity_pair(exercise: str, a: DbId, b: DbId, request: Request,
                    user: User = Depends(instructor_page),
                    db: Session = Depends(get_db, scope="function")):
    info = exercise_or_error(request, exercise)
    pair, first, second = _pair_of(db, info.name, a, b)
    done = request.query_params.get("done") == "flagged"
    return render(request, "similarity_pair.html", user, exercise=info.name, pair=pair,
                  first=first, second=second, flagged_at=similarity.FLAGGED, done=done,
                  first_marked=marked(first.source, pair["a_spans"]),
                  second_marked=marked(second.source, pair["b_spans"]))


@router.post("/admin/similarity/{exercise}/flag", dependencies=[Depends(csrf.check_form)])
def similarity_flag(exercise: str, request: Request, a: int = Form(..., ge=1, le=MAX_ID),
                    b: int = Form(..., ge=1, le=MAX_ID), user: User = Depends(instructor_page),
                    db: Session = Depends(get_db, scope="function")):
    """Both submissions of the pair flagged `suspicious` (they leave the leaderboard and
    the grades' CSV names them, as a flag from the instructor page does)."""
    info = exercise_or_error(request, exercise)
    _, first, second = _pair_of(db, info.name, a, b)
    first.flag = second.flag = Flag.SUSPICIOUS
    db.commit()
    return RedirectResponse(f"/admin/similarity/{info.name}/pair/{a}/{b}?done=flagged",
                            status_code=303)
