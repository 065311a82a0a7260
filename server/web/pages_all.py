"""The web pages: server-rendered Jinja2 templates from frontend/, no CDN, little JS.

Signing in stores the token in an HttpOnly, SameSite=Lax cookie (so other sites
cannot post forms with it); the API accepts that cookie too, which is how the
submission page polls for its result.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
import secrets
import time
from datetime import datetime, timezone
from pathlib import PurePath
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX, Verdict

from . import boards, csrf, readers
from .api.admin import (BOM, UTF8, WINDOWS_1252, csv_cell, issue_tokens, roster_from_csv,
                        roster_text)
from .api.common import NOT_SCORED, exercise_or_error, iso, own_submission, readable
from .api.validation import MAX_ID, DbId, FlagName
from .auth import (COOKIE, end_session, get_db, session_lifetime, session_user, start_session,
                   user_for_token)
from .deadlines import all_extensions, deadline_for, deadlines_for
from .filenames import attachment, stored_name
from .models import Flag, Role, Submission, User, as_utc
from .progress import progress_of
from .services import LATE_POLICIES, Refused, accept_submission, requeue, submissions_query
from .settings import REPO_ROOT
from .student_params import params_for

FRONTEND = REPO_ROOT / "frontend"
templates = Jinja2Templates(directory=FRONTEND / "templates")
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
# the docs the pages serve (/help/<name>): a statement links them by their path in the
# repository (../../docs/benchmarks.md, which works on GitHub too), and the page by /help/
DOCS = {"student-ci": ("student-ci.md", "Grade your kernels on every push"),
        "benchmarks": ("benchmarks.md", "Benchmarks")}
_DOC_LINK = re.compile(r'href="(?:\.\./)*docs/([a-z-]+)\.md"')


def _render_markdown(text: str) -> Markup:
    """Markdown to HTML (no raw HTML through), with links to a served doc made /help/ links."""
    html = _markdown.render(text)
    return Markup(_DOC_LINK.sub(lambda m: f'href="/help/{m.group(1)}"' if m.group(1) in DOCS
                                else m.group(0), html))


templates.env.filters["markdown"] = _render_markdown
templates.env.filters["iso"] = iso


def _when(value: datetime | None) -> Markup:
    """A time people read (UTC, to the minute) in a <time> that machines read."""
    if value is None:
        return Markup("")
    return Markup('<time datetime="{}">{}</time>').format(iso(value), readable(value))


def _in_words(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''}"
    return "less than a minute"


def _due(deadline: datetime) -> Markup:
    """"… (in 3 days)", or "… (passed 2 hours ago)": a past deadline must not read like a
    future one."""
    left = (as_utc(deadline) - datetime.now(timezone.utc)).total_seconds()
    if left >= 0:
        return Markup("{} (in {})").format(_when(deadline), _in_words(left))
    return Markup('{} <strong class="late">(passed {} ago)</strong>').format(
        _when(deadline), _in_words(-left))


# why a verdict gives no score, said where its score would be (api/common.py's NOT_SCORED)
NOT_SCORED_WHY = {Verdict.COMPILED.value: "HIP is graded on a GPU, and this server graded it "
                                          "on the CPU, so the file was only compiled; nothing "
                                          "was run or scored"}
assert set(NOT_SCORED_WHY) == NOT_SCORED


def _score_text(verdict: str | None, score: float | None) -> str:
    """A submission's score in a list: blank before it has one, and "not scored here" for
    a verdict that gives none (never a 0 that nobody earned)."""
    if verdict in NOT_SCORED:
        return "not scored here"
    return "" if score is None else f"{score:g}"


# where a result was graded, when its grader named no device
DEVICE_WORDS = {"cpu": "graded on the CPU", "cuda": "graded on a GPU"}


def _run_summary(result: dict) -> str:
    """The line under a verdict: where it was graded, and for how long when anything ran.
    A file that did not compile ran nothing ("cpu · 0.0 s" said nothing true)."""
    device = result.get("device") or ""
    parts = [result.get("device_name") or DEVICE_WORDS.get(device, device)]
    ran = result.get("verdict") in NOT_SCORED or any(
        c.get("ran", True) for c in result.get("checks") or [])
    seconds = result.get("duration_s") or 0
    if ran and seconds >= 0.05:
        parts.append(f"{seconds:.1f}\u00a0s")  # a number never parted from its unit
    return " · ".join(p for p in parts if p)


templates.env.filters["when"] = _when
templates.env.filters["due"] = _due
templates.env.tests["nonfinite"] = lambda v: isinstance(v, str)  # dumps write NaN/inf as text
templates.env.globals.update(score_text=_score_text, run_summary=_run_summary,
                             not_scored_why=NOT_SCORED_WHY)

router = APIRouter(include_in_schema=False)


def user_for_token_in(request: Request) -> User | None:
    with request.app.state.sessionmaker() as db:
        return session_user(request, db)


def viewer(request: Request, db: Session = Depends(get_db, scope="function")) -> User | None:
    return session_user(request, db)


def signed_in(request: Request, user: User | None = Depends(viewer)) -> User:
    if user is None:  # back to this page after signing in
        raise HTTPException(303, headers={"Location": signin_url(request.url.path,
                                                                 request.url.query)})
    return user


def signin_url(path: str, query: str = "") -> str:
    here = path + (f"?{query}" if query else "")
    return "/signin" if path in ("/", "/signin") else "/signin?" + urlencode({"next": here})


def own_path(target: str, default: str = "/exercises") -> str:
    """``target`` if it is a path of this app (never another site's address), else
    ``default``."""
    parts = urlsplit(target or "")
    if parts.scheme or parts.netloc or not parts.path.startswith("/") \
            or parts.path.startswith("//") or "\\" in target:
        return default
    return parts.path + (f"?{parts.query}" if parts.query else "")


def instructor_page(user: User = Depends(signed_in)) -> User:
    if user.role is not Role.INSTRUCTOR:
        raise HTTPException(403, "instructors only")
    return user


def render(request: Request, name: str, user: User | readers.Reader | None,
           status_code: int = 200,
           **context: Any) -> HTMLResponse:
    token, new_seed = csrf.form_token(request)  # every form on the page carries it
    response = templates.TemplateResponse(request, name, {"user": user, "csrf": token,
                                                          **context}, status_code=status_code)
    csrf.set_seed(response, request, new_seed)
    return response


# -- signing in -----------------------------------------------------------------------------

@router.get("/", response_class=HTMLResponse)
def home():
    return RedirectResponse("/exercises", status_code=303)


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request, next: str = "", signed_out: str = "",
                user: User | None = Depends(viewer)):
    # after signing out, the page says so (it looked as if nothing had happened)
    return render(request, "signin.html", user, next=own_path(next, ""),
                  notice="You are signed out." if signed_out and user is None else "")


@router.post("/signin", dependencies=[Depends(csrf.check_form)])
def signin(request: Request, token: str = Form(""), next: str = Form(""),
           db: Session = Depends(get_db, scope="function")):
    user = user_for_token(db, token.strip())
    if user is None:
        return render(request, "signin.html", None, 401, next=own_path(next, ""),
                      error="That token is not known. Ask your instructor for yours.")
    response = RedirectResponse(own_path(next), status_code=303)
    lifetime = session_lifetime(request)
    response.set_cookie(COOKIE, start_session(db, user, lifetime), httponly=True, samesite="lax",
                        secure=request.url.scheme == "https",
                        max_age=int(lifetime.total_seconds()))
    return response


@router.post("/signout", dependencies=[Depends(csrf.check_form)])
def signout(request: Request, db: Session = Depends(get_db, scope="function")):
    end_session(db, request.cookies.get(COOKIE))  # the cookie is worthless from now on
    response = RedirectResponse("/signin?signed_out=1", status_code=303)
    response.delete_cookie(COOKIE)
    return response


# -- exercises and submitting ------------------------------------------------------------------

@router.get("/exercises", response_class=HTMLResponse)
def exercises_page(request: Request, user: User | None = Depends(viewer),
                   db: Session = Depends(get_db, scope="function")):
    # the reader's deadlines (their extensions, if any: server/deadlines.py), in one query
    deadline = deadlines_for(db, request.app.state.settings, user)
    rows = [(e, deadline(e).at) for e in request.app.state.exercises.values()]
    return render(request, "exercises.html", user, rows=rows)


def _exercise_page(request, db, user, exercise, status_code=200, **context):
    language = context.pop("language", exercise.languages[0])
    skeleton = exercise.skeletons.get(language, {}).get("source", "")
    due = deadline_for(db, request.app.state.settings, exercise, user)
    # the student's own exercise parameters, shown on the page (none signed out)
    params = params_for(request.app.state.settings, request.app.state.exercises,
                        exercise.name, user.username) if user else {}
    return render(request, "exercise.html", user, status_code, exercise=exercise, params=params,
                  deadline=due.at, extended=due.extended, course_deadline=due.course,
                  language=language, source=context.pop("source", skeleton), **context)


@router.get("/exercises/{name}", response_class=HTMLResponse)
def exercise_page(name: str, request: Request, user: User | None = Depends(viewer),
                  db: Session = Depends(get_db, scope="function")):
    return _exercise_page(request, db, user, exercise_or_error(request, name))


@router.get("/exercises/{name}/skeleton/{language}")
def skeleton_download(name: str, language: str, request: Request):
    skeleton = exercise_or_error(request, name).skeletons.get(language)
    if skeleton is None:
        raise HTTPException(404, f"no {language} skeleton for {name}")
    return PlainTextResponse(skeleton["source"], headers={
        "Content-Disposition": attachment(f'{name}_{skeleton["filename"]}')})


@router.get("/help/{name}", response_class=HTMLResponse)
def doc_page(name: str, request: Request, user: User | None = Depends(viewer)):
    """A doc of the repository the pages link to (docs/student-ci.md, a workflow that grades
    a student's repository on every push; docs/benchmarks.md, which the statements cite):
    rendered from the doc itself, so the two never differ."""
    if name not in DOCS or not (path := REPO_ROOT / "docs" / DOCS[name][0]).is_file():
        raise HTTPException(404, f"this server has no doc {name!r}")
    return render(request, "doc.html", user, title=DOCS[name][1], body=path.read_text())


@router.post("/exercises/{name}", dependencies=[Depends(csrf.check_form)],
             include_in_schema=False)
@router.post("/exercises/{name}/submit", dependencies=[Depends(csrf.check_form)])
async def submit_page(name: str, request: Request, source: str = Form(""),
                      language: str = Form(""), file: UploadFile | None = None,
                      user: User = Depends(signed_in), db: Session = Depends(get_db, scope="function")):
    exercise = exercise_or_error(request, name)
    raw: str | bytes = source
    filename = f"submission{ {'triton': '.py', 'hip': '.hip'}.get(language, '') }"
    if file is not None and file.filename:
        raw, filename = await file.read(), file.filename
        # an uploaded file says what it is: a .hip file is HIP whatever the picker was left
        # on (issue 14: it was graded as Triton); a file of no known kind takes the picker's
        language = LANGUAGE_BY_SUFFIX.get(PurePath(filename).suffix.lower(), language)
    try:
        submission = accept_submission(db, request.app.state.settings,
                                       request.app.state.exercises, user, exercise.name,
                                       language or None, filename, raw)
    except Refused as refused:
        # nothing the student wrote or chose is lost: an uploaded text file comes back in the
        # editor, and a submission still being graded is linked
        if isinstance(raw, bytes):
            try:
                source = raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return _exercise_page(request, db, user, exercise, refused.status,
                              error=_refusal_text(refused), source=source,
                              language=language or exercise.languages[0])
    request.app.state.dispatcher.notify()
    return RedirectResponse(f"/submissions/{submission.id}", status_code=303)


def _refusal_text(refused: Refused) -> Markup:
    """A refusal as the page says it: a sentence, with a link to the submission that is
    still being graded when that is the reason."""
    if refused.in_flight is not None:
        return Markup('You already have a submission being graded: wait for it to finish '
                      '(<a href="/submissions/{0}">see submission {0}</a>).'
                      ).format(refused.in_flight)
    return Markup.escape(_sentence(refused.detail))


def _sentence(text: str) -> str:
    """The API's reasons are clauses ("the source is empty"); a page writes sentences. A
    first word that is a name ("safe_softmax accepts …") keeps its case."""
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


# -- submissions ----------------------------------------------------------------------------

@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(submission_id: DbId, request: Request, user: User = Depends(signed_in),
                    db: Session = Depends(get_db, scope="function")):
    s = own_submission(db, user, submission_id)
    result = s.results[-1].result if s.results else None
    progress = progress_of(request, db, s)
    exercise = request.app.state.exercises.get(s.exercise)  # None: no longer served
    return render(request, "submission.html", user, s=s, result=result,
                  due=exercise and deadline_for(db, request.app.state.settings, exercise,
                                                s.user),
                  pending=progress is not None,
                  progress=progress, chart=_chart(result),
                  older=len(s.results) - 1 if s.results else 0)


@router.get("/submissions/{submission_id}/source", response_class=HTMLResponse)
def submission_source(submission_id: DbId, request: Request, user: User = Depends(signed_in),
                      db: Session = Depends(get_db, scope="function")):
    return render(request, "source.html", user, s=own_submission(db, user, submission_id))


@router.get("/submissions/{submission_id}/download/{what}")
def submission_download(submission_id: DbId, what: str, request: Request,
                        user: User = Depends(signed_in), db: Session = Depends(get_db, scope="function")):
    """``source``: the file as submitted; ``result``: the grader's JSON of the newest result."""
    s = own_submission(db, user, submission_id)
    if what == "source":
        name = stored_name(s.filename, "submission.py")  # rows stored before it was cleaned
        return PlainTextResponse(s.source, headers={
            "Content-Disposition": attachment(f"{submission_id}-{name}")})
    if what == "result" and s.results:
        return Response(json.dumps(s.results[-1].result, indent=2), media_type="application/json",
                        headers={"Content-Disposition": attachment(f"{submission_id}-result.json")})
    raise HTTPException(404, f"submission {submission_id} has no {what} to download")


@router.get("/me/diff", response_class=HTMLResponse)
def diff_page(request: Request, a: int = Query(..., ge=1, le=MAX_ID),
              b: int = Query(..., ge=1, le=MAX_ID), user: User = Depends(signed_in),
              db: Session = Depends(get_db, scope="function")):
    """Two of one's own attempts, line by line (a unified diff, oldest first)."""
    old, new = sorted((own_submission(db, user, a), own_submission(db, user, b)), key=lambda s: s.id)
    lines = list(difflib.unified_diff(old.source.splitlines(), new.source.splitlines(),
                                      f"submission {old.id}", f"submission {new.id}",
                                      lineterm=""))
    return render(request, "diff.html", user, old=old, new=new, lines=lines)


@router.get("/me", response_class=HTMLResponse)
def my_page(request: Request, user: User = Depends(signed_in), db: Session = Depends(get_db, scope="function")):
    rows = db.scalars(select(Submission).where(Submission.user_id == user.id)
                      .order_by(Submission.exercise, Submission.id.desc())).all()
    grouped: dict[str, list[Submission]] = {}
    for s in rows:
        grouped.setdefault(s.exercise, []).append(s)
    return render(request, "mine.html", user, grouped=grouped,
                  pairs={name: _latest_pair(subs) for name, subs in grouped.items()})


def _latest_pair(rows: list[Submission]) -> tuple[int, int] | None:
    """What "show the changes" compares at first (rows newest first): the latest two
    attempts in one language, older first; a HIP file against a Python file says nothing.
    None when no language has two (then the two newest)."""
    newest: dict[str, int] = {}
    for s in rows:
        if s.language in newest:
            return s.id, newest[s.language]
        newest[s.language] = s.id
    return None


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_index(request: Request):
    first = next(iter(request.app.state.exercises))
    return RedirectResponse(f"/leaderboard/{first}", status_code=303)


@router.get("/leaderboard/{name}", response_class=HTMLResponse)
async def leaderboard_page(name: str, request: Request):
    """The most read page, served on the event loop (no thread, no database) while its
    board is fresh and its reader is known (server/readers.py); else looked up on a thread."""
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


# -- instructor -----------------------------------------------------------------------------

@router.get("/admin", response_class=HTMLResponse)
def admin_page(request: Request, exercise: str = "", student: str = "", verdict: str = "",
               user: User = Depends(instructor_page), db: Session = Depends(get_db, scope="function")):
    return _admin(request, user, db, {"exercise": exercise, "student": student,
                                      "verdict": verdict})


FILTERS = ("exercise", "student", "verdict")


def _admin(request: Request, user: User, db: Session, filters: dict[str, str] | None = None,
           status: int = 200, **extra: Any) -> HTMLResponse:
    """The instructor page; a form it refused shows it again as it was, with the filters of
    the page that posted (``filters`` None) and what was typed (``extra``'s *_form)."""
    filters = filters if filters is not None else _filters_posted_from(request)
    rows = db.scalars(submissions_query(**filters).limit(500)).all()
    students = db.scalars(select(User).where(User.role == Role.STUDENT)
                          .order_by(User.username)).all()
    return render(request, "admin.html", user, status, rows=rows, students=students,
                  exercises=request.app.state.exercises, filters=filters,
                  verdicts=[v.value for v in Verdict],  # the graders' own list: none missing
                  notice=notice_from(request), extensions=all_extensions(
                      db, request.app.state.settings, request.app.state.exercises),
                  late_policy=LATE_POLICIES[request.app.state.settings.late_policy], **extra)


def _filters_posted_from(request: Request) -> dict[str, str]:
    """The filters of the /admin page whose form was posted (its Referer, when ours)."""
    parts = urlsplit(back_to(request, "/admin"))
    query = dict(parse_qsl(parts.query)) if parts.path == "/admin" else {}
    return {name: query.get(name, "")[:64] for name in FILTERS}


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
        return _admin(request, user, db, status=404, submissions_error=(
            f"No submission {submission_id}: nothing was regraded."))
    if not submission_id:
        typed = {"regrade_form": {"exercise": exercise, "confirm": confirm}}  # shown again
        if exercise not in request.app.state.exercises:
            return _admin(request, user, db, status=422,
                          regrade_error="Choose the exercise to regrade.", **typed)
        if confirm != "yes":
            return _admin(request, user, db, status=422, **typed, regrade_error=(
                f"To regrade every submission of {exercise}, tick the box that says so."))
    count = requeue(db, submission_id, None if submission_id else exercise)
    request.app.state.dispatcher.notify()
    what = f"submission {submission_id}" if submission_id else f"all of {exercise}"
    return RedirectResponse(_with_notice(back_to(request, "/admin"), "regraded", what, count),
                            status_code=303)


# what a form did, said on the page it returns to: known words only (the query string is
# the visitor's to change, so it picks a message, it does not carry one)
NOTICES = {"regraded": "Regrade of {what}: {n} queued; old results stay until the new ones "
                       "are stored.",
           "flagged": "Submission {what} is now flagged {flag}.",
           "extended": "Extension granted to {what}; {n} of their submissions re-marked.",
           "unextended": "Extension of {what} removed; {n} of their submissions re-marked "
                         "against the course deadline."}


def _with_notice(path: str, kind: str, what: str, n: int = 0, flag: str = "") -> str:
    parts = urlsplit(path)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("done", "what", "n", "flag")]
    query += [("done", kind), ("what", what), ("n", str(n)), ("flag", flag)]
    return parts.path + "?" + urlencode(query)


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
               user: User = Depends(instructor_page), db: Session = Depends(get_db, scope="function")):
    s = db.get(Submission, submission_id)
    if s is None:  # the instructor page again, as it was, not a bare error page
        return _admin(request, user, db, status=404, submissions_error=(
            f"No submission {submission_id}: nothing was flagged."))
    s.flag = Flag(flag)
    db.commit()
    return RedirectResponse(_with_notice(back_to(request, "/admin"), "flagged", str(s.id),
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
        return _admin(request, user, db, status=422, roster_error=(
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
        return _admin(request, user, db, status=422, roster_text=text,
                      roster_error=_sentence(f"That roster was not accepted{which}: "
                                             f"{getattr(exc, 'detail', exc)}"))
    key = secrets.token_urlsafe(16)
    waiting = request.app.state.issued_rosters
    now = time.monotonic()
    for old in [k for k, (at, *_) in waiting.items() if now - at > ROSTER_SHOWN_FOR_S]:
        del waiting[old]
    waiting[key] = (now, issued, encoding)
    return RedirectResponse(f"/admin/roster/{key}", status_code=303)


@router.get("/admin/roster/{key}", response_class=HTMLResponse)
def admin_roster_tokens(key: str, request: Request, user: User = Depends(instructor_page)):
    """The tokens of one upload, shown once, with a CSV to download; gone on reload."""
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
        csv_text = BOM + buffer.getvalue()  # so that Excel reads it as UTF-8 (api/admin.py)
    return render(request, "roster.html", user, 200 if issued else 410, issued=issued,
                  csv_text=csv_text, read_as_windows_1252=encoding == WINDOWS_1252)


# -- the GB/s chart of a GPU result --------------------------------------------------------

def _said(label: str, diagnosis: dict) -> dict:
    """One shape's speed words: the time in the traffic table's terms, the compiled
    kernels' facts and the warnings with their fixes (old results have only the first)."""
    text = diagnosis.get("text")
    return {"label": label, "text": text if isinstance(text, str) else "",
            "kernels": [k["text"] for k in diagnosis.get("kernels") or []
                        if isinstance(k, dict) and isinstance(k.get("text"), str)],
            # a kernel's name is written `name`: split there, so the page sets it as code
            "warnings": [w.split("`") for w in diagnosis.get("warnings") or []
                         if isinstance(w, str)]}


def _chart(result: dict | None) -> dict | None:
    """Bars of GB/s per graded shape beside the copy ceiling, as SVG coordinates."""
    shapes = ((result or {}).get("performance") or {}).get("shapes") or []
    if not shapes:
        return None
    top = max(max(s.get("copy_gbs") or 0, s.get("gbs") or 0) for s in shapes) or 1
    # 800 wide: the label after the longest bar (x = 596) needs about 190 more
    bars, said, width, height = [], [], 800, 28 * len(shapes) * 2 + 40
    for i, s in enumerate(shapes):
        y = 20 + i * 56
        label = f"{s.get('rows')}×{s.get('cols')} {s.get('dtype')}"
        # what each shape's time says (graders/engine/performance.py words it; old results
        # have none)
        if isinstance(s.get("diagnosis"), dict) and s["diagnosis"]:
            said.append(_said(label, s["diagnosis"]))
        bars.append({"y": y, "label": label,
                     "copy_w": 420 * (s.get("copy_gbs") or 0) / top,
                     "got_w": 420 * (s.get("gbs") or 0) / top,
                     "copy": s.get("copy_gbs"), "gbs": s.get("gbs"),
                     "fraction": s.get("fraction")})
    return {"bars": bars, "width": width, "height": height, "said": said}
