"""Instructor endpoints: roster, every submission, regrade, flags, CSV export."""

from __future__ import annotations

import csv
import io
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from ..auth.deps import DbId, exercise_or_error, get_db, instructor
from ..auth.roster_tokens import issue_tokens
from ..domain.deadlines import applying, deadline_of, extensions_by_student
from ..domain.filenames import attachment
from ..domain.formatting import iso
from ..domain.leaderboard import best_per_student, flagged_per_student, not_scored_per_student
from ..domain.models import Flag, Role, Submission, User
from ..domain.roster import BOM, Roster, csv_cell, roster_from_csv, roster_text
from ..domain.submissions import requeue, submissions_query
from ..domain.validation import MAX_ID, FlagName, StatusName, Unstorable, Verdict
from .deps import read_json, submission_json

router = APIRouter(prefix="/api/admin", tags=["admin"], dependencies=[Depends(instructor)])


@router.post("/students")
async def add_students(request: Request, db: Session = Depends(get_db, scope="function")):
    """JSON {"students": [{"username", "display_name"}]}, or a CSV file with those columns.
    Reading and issuing run on a thread: a long roster never holds up other requests."""
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("multipart/form-data"):
        upload = (await request.form()).get("file")
        if upload is None or isinstance(upload, str):
            raise HTTPException(422, "upload the roster as a CSV `file`")
        data = await upload.read()
        try:
            text, encoding = roster_text(data)
            roster = await run_in_threadpool(roster_from_csv, text)
        except Unstorable as exc:  # as for a JSON body's text
            raise HTTPException(422, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(422, f"bad roster: {exc}") from None
        # how the file was read, so that a Windows-1252 one is known to have been taken as such
        return {"students": await run_in_threadpool(issue_tokens, db, roster.students),
                "encoding": encoding}
    try:
        roster = await run_in_threadpool(Roster.model_validate, await read_json(request))
    except ValueError as exc:
        raise HTTPException(422, f"bad roster: {exc}") from None
    return {"students": await run_in_threadpool(issue_tokens, db, roster.students)}


@router.get("/submissions")
def all_submissions(request: Request, exercise: str = "", student: str = "",
                    verdict: Verdict | Literal[""] = "", status: StatusName | Literal[""] = "",
                    flag: FlagName | Literal[""] = "", db: Session = Depends(get_db, scope="function")):
    rows = db.scalars(submissions_query(exercise, student, verdict, status, flag)).all()
    return {"submissions": [dict(submission_json(request, s, with_result=False),
                                 username=s.user.username, display_name=s.user.display_name)
                            for s in rows]}


@router.get("/submissions/{submission_id}/source", response_class=PlainTextResponse)
def submission_source(submission_id: DbId, db: Session = Depends(get_db, scope="function")):
    s = db.get(Submission, submission_id)
    if s is None:
        raise HTTPException(404, f"no submission {submission_id}")
    return s.source


class RegradeIn(BaseModel):
    submission_id: int | None = Field(None, ge=1, le=MAX_ID)
    exercise: str | None = None


@router.post("/regrade")
def regrade(body: RegradeIn, request: Request, db: Session = Depends(get_db, scope="function")):
    """Queue again (after a grader fix); the new result is kept beside the old."""
    if (body.submission_id is None) == (body.exercise is None):
        raise HTTPException(422, "give either submission_id or exercise")
    if body.submission_id is not None and db.get(Submission, body.submission_id) is None:
        raise HTTPException(404, f"no submission {body.submission_id}")
    if body.exercise is not None:
        exercise_or_error(request, body.exercise)
    count = requeue(db, body.submission_id, body.exercise)
    request.app.state.dispatcher.notify()
    return {"queued": count}


class FlagIn(BaseModel):
    flag: Literal["none", "suspicious", "invalidated"]


@router.post("/submissions/{submission_id}/flag")
def flag_submission(submission_id: DbId, body: FlagIn, request: Request,
                    db: Session = Depends(get_db, scope="function")):
    s = db.get(Submission, submission_id)
    if s is None:
        raise HTTPException(404, f"no submission {submission_id}")
    s.flag = Flag(body.flag)
    db.commit()
    return submission_json(request, s, with_result=False)


def csv_response(text: str, filename: str) -> Response:
    return Response((BOM + text).encode("utf-8"), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": attachment(filename)})


@router.get("/export.csv")
def export_csv(request: Request, db: Session = Depends(get_db, scope="function")):
    """One row per student per exercise, those without a submission too: the counted score
    under LATE_POLICY, the flagged submissions that do not count, the deadline that applied
    to that student (`extension` yes when theirs was extended: server/domain/deadlines.py), and the
    submissions that have no score (`not_scored`: HIP only compiled, without a GPU), which
    never count as a grade."""
    settings = request.app.state.settings
    policy = settings.late_policy
    students = db.scalars(select(User).where(User.role == Role.STUDENT)
                          .order_by(User.username)).all()
    granted = extensions_by_student(db)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["username", "display_name", "exercise", "best_score", "submission_id",
                     "late", "submitted_at", "flagged", "late_policy", "deadline", "extension",
                     "not_scored"])
    for name, exercise in request.app.state.exercises.items():
        counted = best_per_student(db, name, policy)
        flagged = flagged_per_student(db, name)
        unscored = not_scored_per_student(db, name)
        course = deadline_of(settings, exercise)
        for user in students:
            s = counted.get(user.id)
            marks = " ".join(f"{f.id}:{f.flag.value}" for f in flagged.get(user.id, []))
            row = [s.score, s.id, "yes" if s.late else "no", iso(s.created_at)] if s \
                else ["", "", "", ""]
            due = applying(course, granted.get((user.id, name)))
            writer.writerow([csv_cell(user.username), csv_cell(user.display_name), name, *row,
                             marks, policy, iso(due.at) or "", "yes" if due.extended else "no",
                             " ".join(f"{u.id}:{u.verdict}" for u in unscored.get(user.id, []))])
    return csv_response(out.getvalue(), "grades.csv")
