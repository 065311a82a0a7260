"""Instructor endpoints: roster, every submission, regrade, flags, CSV export."""

from __future__ import annotations

import csv
import io
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, Field, model_validator
from starlette.concurrency import run_in_threadpool
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..auth import end_sessions_of, get_db, hash_token, instructor, new_token
from ..deadlines import applying, deadline_of, extensions_by_student
from ..filenames import attachment
from ..models import USERNAME_PATTERN, Flag, Role, Submission, User
from .. import similarity
from ..services import (best_per_student, flagged_per_student, not_scored_per_student, requeue,
                        submissions_query)
from .common import exercise_or_error, iso, submission_json
from .validation import MAX_ID, DbId, FlagName, StatusName, Verdict, check_unicode, read_json

router = APIRouter(prefix="/api/admin", tags=["admin"], dependencies=[Depends(instructor)])


class StudentIn(BaseModel):
    username: str = Field(pattern=f"^{USERNAME_PATTERN}$")
    display_name: str = Field(min_length=1, max_length=128)


class Roster(BaseModel):
    students: list[StudentIn]

    @model_validator(mode="after")
    def _each_username_once(self):
        # twice in one roster would issue two tokens, and the first would be dead at once
        seen, twice = set(), set()
        for student in self.students:
            if student.username in seen:
                twice.add(student.username)
            seen.add(student.username)
        if twice:
            raise ValueError(f"a roster names each username once; twice: {', '.join(sorted(twice))}")
        return self


# How a roster file's bytes are read: UTF-8 (with Excel's byte-order mark or without), else
# Windows-1252, which is what Excel on Windows saves as plain "CSV". A file that is valid
# UTF-8 is never read as Windows-1252 (text in the one is almost never valid in the other).
UTF8, WINDOWS_1252 = "utf-8", "windows-1252"


def roster_text(data: bytes) -> tuple[str, str]:
    """The roster file's text and the encoding it was read in; ValueError says what to do
    with a file that is neither."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError("the file is UTF-16 (Excel's \"Unicode Text\"): save it as \"CSV UTF-8 "
                         "(Comma delimited)\" and upload that")
    try:
        return data.decode("utf-8-sig"), UTF8
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), WINDOWS_1252
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is neither UTF-8 nor Windows-1252 text (byte {exc.start}): "
                         "save it as \"CSV UTF-8 (Comma delimited)\" and upload that") from None


def roster_from_csv(text: str) -> Roster:
    """A roster from CSV with the header row username,display_name; ValueError says why not
    (and, as for a JSON body, text a database cannot store is a 422)."""
    check_unicode(text, "the roster")
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not {"username", "display_name"} <= set(rows[0]):
        raise ValueError("the CSV needs a header row: username,display_name")
    return Roster(students=[{"username": (r["username"] or "").strip(),
                             "display_name": (r["display_name"] or "").strip()} for r in rows])


ROSTER_BATCH = 500  # usernames per query (SQLite takes 32,766 parameters, PostgreSQL 65,535)


def issue_tokens(db: Session, students: list[StudentIn]) -> list[dict[str, str]]:
    """New students get a token; a known username gets a fresh one (the old stops working,
    and so do browser sessions made with it). Committed as one; an instructor's username
    refuses the whole roster (409). Blocking: routes run it on a thread (a 3,000-student
    roster took 2.6 s on the event loop, and the whole server waited: issue 26, item 6)."""
    names = [s.username for s in students]
    known: dict[str, User] = {}
    for start in range(0, len(names), ROSTER_BATCH):
        known.update((u.username, u) for u in db.scalars(
            select(User).where(User.username.in_(names[start:start + ROSTER_BATCH]))))
    instructors = [n for n in names if n in known and known[n].role is Role.INSTRUCTOR]
    if instructors:
        raise HTTPException(409, f"{instructors[0]!r} is an instructor")
    issued, reissued = [], []
    for student in students:
        token = new_token()
        user = known.get(student.username)
        if user is None:
            db.add(User(username=student.username, display_name=student.display_name,
                        role=Role.STUDENT, token_hash=hash_token(token)))
        else:
            user.display_name, user.token_hash = student.display_name, hash_token(token)
            reissued.append(user.id)
        issued.append({"username": student.username, "display_name": student.display_name,
                       "token": token})
    for start in range(0, len(reissued), ROSTER_BATCH):
        end_sessions_of(db, reissued[start:start + ROSTER_BATCH])  # old tokens' browsers
    db.commit()
    return issued


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


def csv_cell(text: str) -> str:
    """A spreadsheet runs a cell that starts with = + - @ as a formula: quote it."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


# Excel reads a CSV without a byte-order mark in the machine's own code page, so "Ångström"
# would open as "Ã…ngstrÃ¶m": every CSV the server writes starts with one.
BOM = "\ufeff"


def csv_response(text: str, filename: str) -> Response:
    return Response((BOM + text).encode("utf-8"), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": attachment(filename)})


@router.get("/export.csv")
def export_csv(request: Request, db: Session = Depends(get_db, scope="function")):
    """One row per student per exercise, those without a submission too: the counted score
    under LATE_POLICY, the flagged submissions that do not count, the deadline that applied
    to that student (`extension` yes when theirs was extended: server/deadlines.py), and the
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


# -- similarity (issue 30): computed in a process of its own, read from the database --------
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


def skeletons_of(info) -> dict[str, str]:
    """Each language's skeleton text: the boilerplate no match may count."""
    return {language: skeleton.get("source", "") for language, skeleton in info.skeletons.items()}
