"""The instructor's class view (/admin/class, issue 42): every student on the roster with
their counted score per exercise, late work and extensions, their last submission, and who
has nothing, sorted, filtered and paged by links (server/web/listing.py); the rows are
read by server/domain/class_view.py."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from ..auth.deps import get_db
from ..domain.class_view import CLASS_SORTS, PAGE_SIZES, SCORE_SORT, class_page, class_summary
from ..domain.deadlines import deadline_of
from ..domain.leaderboard import LATE_POLICIES
from ..domain.models import User
from .guards import instructor_page
from .listing import read_listing
from .render import render

router = APIRouter(include_in_schema=False)

NOTHING = "nothing"  # ?show=nothing: no submission at all; nothing:<exercise>: none to it


def shows(exercises) -> list[tuple[str, str]]:
    """The "Show" menu: everyone, or only those with nothing (at all, or for one exercise)."""
    return [("", "everyone"), (NOTHING, "no submission at all")] + [
        (f"{NOTHING}:{name}", f"no submission to {name}") for name in exercises]


@router.get("/admin/class", response_class=HTMLResponse)
def class_view(request: Request, user: User = Depends(instructor_page),
               db: Session = Depends(get_db, scope="function")):
    state = request.app.state
    exercises, policy = state.exercises, state.settings.late_policy
    query = dict(request.query_params)
    show, refused = query.get("show", ""), []
    if show not in dict(shows(exercises)):
        refused.append(f"There is no list {show[:40]!r}: this is everyone.")
        show = ""
    sorts = CLASS_SORTS | {f"{SCORE_SORT}{name}": "desc" for name in exercises}
    listing, wrong = read_listing(query, "/admin/class", sorts, "name", kept={"show": show})
    refused += wrong
    course = {name: deadline_of(state.settings, e) for name, e in exercises.items()}
    listed = class_page(db, course, policy, listing.sort, listing.order, listing.page,
                        listing.size, show)
    sort_names = [("name", "name"), ("last", "last submission (nothing first)"),
                  ("submissions", "number of submissions")] + [
        (f"{SCORE_SORT}{name}", f"score in {name}") for name in exercises]
    return render(request, "class.html", user, 422 if refused else 200, listed=listed,
                  listing=listing.at(listed.page), listing_error=" ".join(refused),
                  summary=class_summary(db, list(exercises)), exercises=exercises,
                  course=course, show=show, shows=shows(exercises), sort_names=sort_names,
                  page_sizes=PAGE_SIZES, score_sort=SCORE_SORT, late_policy=LATE_POLICIES[policy],
                  policy=policy)
