"""The leaderboard pages: the most read page of the site, served from the board cache."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from ..auth import readers
from ..auth.deps import exercise_or_error
from ..domain import board_cache as boards
from ..domain.leaderboard import LATE_POLICIES
from .render import render, templates

router = APIRouter(include_in_schema=False)


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_index(request: Request):
    first = next(iter(request.app.state.exercises))
    return RedirectResponse(f"/leaderboard/{first}", status_code=303)


@router.get("/leaderboard/{name}", response_class=HTMLResponse)
async def leaderboard_page(name: str, request: Request):
    """The most read page, served on the event loop (no thread, no database) while its
    board is fresh and its reader is known (server/auth/readers.py); else looked up on a thread."""
    exercise = exercise_or_error(request, name)
    policy = request.app.state.settings.late_policy
    snapshot = boards.cached(name, policy)
    known, reader = readers.remembered(request)
    if snapshot is None or not known:
        snapshot, reader = await run_in_threadpool(_board_and_reader, request, name, policy)
    return render(request, "leaderboard.html", reader, exercise=exercise,
                  rows=_board_rows(snapshot, reader),
                  exercises=request.app.state.exercises, late_policy=LATE_POLICIES[policy])


def _board_and_reader(request: Request, name: str,
                      policy: str) -> tuple[boards.Snapshot, readers.Reader | None]:
    snapshot = boards.board(request.app.state.sessionmaker, name, policy)
    with request.app.state.sessionmaker() as db:
        return snapshot, readers.look_up(request, db)


_board_row = templates.env.get_template("_board_row.html").module.board_row


def _board_rows(snapshot: boards.Snapshot, user: readers.Reader | None) -> Markup:
    """The board's rows as HTML, rendered once per board (300 rows took most of a page's
    time); the reader's own row rendered again, marked as theirs."""
    rows = snapshot.rendered.get("rows")
    if rows is None:  # two threads may both render it: the same rows either way
        rows = snapshot.rendered["rows"] = [_board_row(entry, False)
                                            for _, entry in snapshot.entries]
        snapshot.rendered["html"] = Markup("\n".join(rows))
    if user is None or all(student_id != user.id for student_id, _ in snapshot.entries):
        return snapshot.rendered["html"]
    return Markup("\n".join(_board_row(entry, True) if student_id == user.id else row
                             for (student_id, entry), row in zip(snapshot.entries, rows)))
