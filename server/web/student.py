"""A student's pages: the exercises and their statements, submitting (the editor or a
file), a submission's result as it arrives, downloads, and one's own attempts compared."""

from __future__ import annotations

import difflib
import json
from pathlib import PurePath

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.orm import Session

from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX

from ..auth import csrf
from ..auth.deps import DbId, exercise_or_error, get_db, own_submission
from ..core.settings import REPO_ROOT
from ..domain.admission import Refused
from ..domain.deadlines import deadline_for, deadlines_for
from ..domain.filenames import attachment, stored_name
from ..domain.models import Submission, User
from ..domain.progress import progress_of
from ..domain.student_params import params_for
from ..domain.submissions import accept_submission
from ..domain.validation import MAX_ID
from .guards import signed_in, viewer
from .render import DOCS, chart, render, sentence

router = APIRouter(include_in_schema=False)


# -- exercises and submitting ------------------------------------------------------------------

@router.get("/exercises", response_class=HTMLResponse)
def exercises_page(request: Request, user: User | None = Depends(viewer),
                   db: Session = Depends(get_db, scope="function")):
    # the reader's deadlines (their extensions, if any: server/domain/deadlines.py), in one query
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
    uploaded = file is not None and bool(file.filename)
    if uploaded:
        # a chosen file is sent, not the editor's code (the form says so beside the picker)
        raw, filename = await file.read(), PurePath(file.filename).name
        # an uploaded file says what it is: a .hip file is HIP whatever the picker was left
        # on (issue 14: it was graded as Triton); a file of no known kind is refused
        language = LANGUAGE_BY_SUFFIX.get(PurePath(filename).suffix.lower(), language)
    try:
        submission = accept_submission(db, request.app.state.settings,
                                       request.app.state.exercises, user, exercise.name,
                                       language or None, filename, raw, uploaded=uploaded)
    except Refused as refused:
        # nothing the student wrote or chose is lost: an uploaded source file comes back in
        # the editor, and a submission still being graded is linked; a file that is not
        # source (notes.txt, a notebook, a binary, an empty file) leaves the editor as it was
        if uploaded and PurePath(filename).suffix.lower() in LANGUAGE_BY_SUFFIX:
            try:
                source = raw.decode("utf-8") if raw.strip() else source
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
    return Markup.escape(sentence(refused.detail))


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
                  progress=progress, chart=chart(result),
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
