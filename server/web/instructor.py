"""The instructor's page: every submission with filters, regrades, flags, and a roster
uploaded for tokens shown once. Its forms post, then redirect back with a notice; a form
it refuses shows the page again with a 4xx and what was typed."""

from __future__ import annotations

import csv
import io
import secrets
import time
from pathlib import PurePath
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Depends, Form, HTTPException, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from graders.shared.vocabulary import Verdict

from ..auth import csrf
from ..auth.deps import DbId, get_db
from ..auth.roster_tokens import issue_tokens
from ..domain.class_view import PAGE_SIZES, SUBMISSION_SORTS, class_summary, submissions_page
from ..domain.deadlines import all_extensions
from ..domain.leaderboard import LATE_POLICIES
from ..domain.lti_records import LtiPlatform
from ..domain.models import Flag, Role, Submission, User
from ..domain.roster import BOM, UTF8, WINDOWS_1252, csv_cell, roster_from_csv, roster_text
from ..domain.submissions import requeue, submissions_query
from ..domain.validation import MAX_ID, FlagName
from .guards import instructor_page, own_path
from .listing import read_listing
from .lti import tool_base
from .render import render, sentence

router = APIRouter(include_in_schema=False)


@router.get("/admin", response_class=HTMLResponse)
def admin_page(request: Request, user: User = Depends(instructor_page),
               db: Session = Depends(get_db, scope="function")):
    return admin_view(request, user, db, dict(request.query_params))


FILTERS = ("exercise", "student", "verdict")
SORT_NAMES = (("time", "time submitted"), ("student", "student"), ("exercise", "exercise"),
              ("score", "score"), ("verdict", "verdict"))


def admin_view(request: Request, user: User, db: Session, query: dict[str, str] | None = None,
               status: int = 200, **extra: Any) -> HTMLResponse:
    """The instructor page; a form it refused shows it again as it was, with the filters,
    sort and page of the page that posted (``query`` None) and what was typed (``extra``'s
    *_form). A sort or page it does not know is said on the page, which answers 422."""
    asked = query is not None
    query = query if asked else _query_posted_from(request)
    filters = {name: query.get(name, "")[:64] for name in FILTERS}
    listing, refused = read_listing(query, "/admin", SUBMISSION_SORTS, "time", kept=filters)
    listed = submissions_page(db, submissions_query(**filters), listing.sort, listing.order,
                              listing.page, listing.size)
    if asked and refused and status == 200:
        status = 422
    exercises = request.app.state.exercises
    students = db.scalars(select(User).where(User.role == Role.STUDENT)
                          .order_by(User.username)).all()
    return render(request, "admin.html", user, status, rows=listed.rows, listed=listed,
                  listing=listing.at(listed.page), sort_names=SORT_NAMES,
                  page_sizes=PAGE_SIZES, listing_error=" ".join(refused) if asked else "",
                  summary=class_summary(db, list(exercises)), students=students,
                  exercises=exercises, filters=filters,
                  verdicts=[v.value for v in Verdict],  # the graders' own list: none missing
                  notice=notice_from(request), extensions=all_extensions(
                      db, request.app.state.settings, exercises),
                  late_policy=LATE_POLICIES[request.app.state.settings.late_policy], **extra)


def _query_posted_from(request: Request) -> dict[str, str]:
    """The query of the /admin page whose form was posted (its Referer, when ours)."""
    parts = urlsplit(back_to(request, "/admin"))
    return dict(parse_qsl(parts.query)) if parts.path == "/admin" else {}


@router.get("/admin/source/{submission_id}", response_class=HTMLResponse)
def admin_source(submission_id: DbId, request: Request, user: User = Depends(instructor_page),
                 db: Session = Depends(get_db, scope="function")):
    s = db.get(Submission, submission_id)
    if s is None:
        raise HTTPException(404, f"no submission {submission_id}")
    return render(request, "source.html", user, s=s)


@router.post("/admin/regrade", dependencies=[Depends(csrf.check_form)])
def admin_regrade(request: Request, submission_id: int | None = Form(None, ge=1, le=MAX_ID),
                  exercise: str = Form(""), confirm: str = Form(""),
                  user: User = Depends(instructor_page),
                  db: Session = Depends(get_db, scope="function")):
    if submission_id and db.get(Submission, submission_id) is None:
        return admin_view(request, user, db, status=404, submissions_error=(
            f"No submission {submission_id}: nothing was regraded."))
    if not submission_id:
        typed = {"regrade_form": {"exercise": exercise, "confirm": confirm}}  # shown again
        if exercise not in request.app.state.exercises:
            return admin_view(request, user, db, status=422,
                          regrade_error="Choose the exercise to regrade.", **typed)
        if confirm != "yes":
            return admin_view(request, user, db, status=422, **typed, regrade_error=(
                f"To regrade every submission of {exercise}, tick the box that says so."))
    count = requeue(db, submission_id, None if submission_id else exercise)
    request.app.state.dispatcher.notify()
    what = f"submission {submission_id}" if submission_id else f"all of {exercise}"
    return RedirectResponse(with_notice(back_to(request, "/admin"), "regraded", what, count),
                            status_code=303)


# what a form did, said on the page it returns to: known words only (the query string is
# the visitor's to change, so it picks a message, it does not carry one)
NOTICES = {"regraded": "Regrade of {what}: {n} queued; old results stay until the new ones "
                       "are stored.",
           "flagged": "Submission {what} is now flagged {flag}.",
           "extended": "Extension granted to {what}; {n} of their submissions re-marked.",
           "unextended": "Extension of {what} removed; {n} of their submissions re-marked "
                         "against the course deadline."}


def with_notice(path: str, kind: str, what: str, n: int = 0, flag: str = "") -> str:
    parts = urlsplit(path)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("done", "what", "n", "flag")]
    query += [("done", kind), ("what", what), ("n", str(n)), ("flag", flag)]
    # "#top": a form that posts to its own card (action="…#roster-h", so that a refusal
    # shows it there) would otherwise hand that fragment on to this address
    return parts.path + "?" + urlencode(query) + "#top"


def notice_from(request: Request) -> str:
    q = request.query_params
    template = NOTICES.get(q.get("done", ""))
    if template is None:
        return ""
    flag = q.get("flag", "")
    return template.format(what=q.get("what", "")[:80], n=int(q.get("n", "0") or 0)
                           if q.get("n", "").isdigit() else 0,
                           flag=flag if flag in ("none", "suspicious", "invalidated") else "")


def back_to(request: Request, default: str) -> str:
    """Where the page that posted came from, if it is one of ours; else ``default``.
    A Referer is the browser's word: another site's address is never followed."""
    referer = urlsplit(request.headers.get("referer", ""))
    ours = urlsplit(str(request.base_url))
    if referer.scheme in ("http", "https") and referer.netloc == ours.netloc:
        return own_path(urlunsplit(("", "", referer.path, referer.query, "")), default)
    return default


@router.post("/admin/flag", dependencies=[Depends(csrf.check_form)])
def admin_flag(request: Request, submission_id: int = Form(..., ge=1, le=MAX_ID),
               flag: FlagName = Form(...),
               user: User = Depends(instructor_page),
               db: Session = Depends(get_db, scope="function")):
    s = db.get(Submission, submission_id)
    if s is None:  # the instructor page again, as it was, not a bare error page
        return admin_view(request, user, db, status=404, submissions_error=(
            f"No submission {submission_id}: nothing was flagged."))
    s.flag = Flag(flag)
    db.commit()
    return RedirectResponse(with_notice(back_to(request, "/admin"), "flagged", str(s.id),
                                         flag=flag), status_code=303)


ROSTER_SHOWN_FOR_S = 600  # a roster's tokens wait this long for their one showing


@router.post("/admin/roster", response_class=HTMLResponse,
             dependencies=[Depends(csrf.check_form)])
async def admin_roster(request: Request, file: UploadFile | None = None,
                       text: str = Form(""), user: User = Depends(instructor_page),
                       db: Session = Depends(get_db, scope="function")):
    """Issues the tokens, then redirects to a page that shows them once: reloading that page
    must not post the roster again (every student would silently get a new token).

    The roster is a CSV file or its text pasted. A browser cannot be handed a file back, so
    a refused roster comes back as text in the paste box, to be corrected there."""
    uploaded = file is not None and bool(file.filename)
    if not uploaded and not text.strip():
        return admin_view(request, user, db, status=422, roster_error=(
            "Choose a CSV file with a header row username,display_name, or paste its lines."))
    encoding, which = UTF8, ""
    try:
        if uploaded:
            which = f" ({PurePath(file.filename).name})"
            text, encoding = roster_text(await file.read())
        # on a thread: a long roster must not hold up the other requests (issue 26, item 6)
        roster = await run_in_threadpool(roster_from_csv, text)
        issued = await run_in_threadpool(issue_tokens, db, roster.students)
    except (ValueError, HTTPException) as exc:
        db.rollback()  # students added before the bad line are not shown, nor kept
        return admin_view(request, user, db, status=422, roster_text=text,
                      roster_error=sentence(f"That roster was not accepted{which}: "
                                             f"{getattr(exc, 'detail', exc)}"))
    key = secrets.token_urlsafe(16)
    waiting = request.app.state.issued_rosters
    now = time.monotonic()
    for old in [k for k, (at, *_) in waiting.items() if now - at > ROSTER_SHOWN_FOR_S]:
        del waiting[old]
    waiting[key] = (now, issued, encoding)
    return RedirectResponse(f"/admin/roster/{key}", status_code=303)


@router.get("/admin/roster/{key}", response_class=HTMLResponse)
def admin_roster_tokens(key: str, request: Request, user: User = Depends(instructor_page),
                        db: Session = Depends(get_db, scope="function")):
    """The tokens of one upload, shown once, with a CSV to download; gone on reload. It says
    where students sign in with them (PUBLIC_URL's /signin, else the address this request
    came to), and that the LMS is the other way in once a platform is registered."""
    at, issued, encoding = request.app.state.issued_rosters.pop(key, (0.0, None, UTF8))
    if issued is not None and time.monotonic() - at > ROSTER_SHOWN_FOR_S:
        issued = None
    csv_text = None
    if issued:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["username", "display_name", "token"])
        writer.writerows([t["username"], csv_cell(t["display_name"]), t["token"]]
                         for t in issued)
        # so that Excel reads it as UTF-8 (server/domain/roster.py)
        csv_text = BOM + buffer.getvalue()
    platforms = db.scalar(select(func.count()).select_from(LtiPlatform))
    return render(request, "roster.html", user, 200 if issued else 410, issued=issued,
                  csv_text=csv_text, read_as_windows_1252=encoding == WINDOWS_1252,
                  signin_url=f"{tool_base(request)}/signin", lti_platforms=platforms)
