"""The instructor's similarity pages (issue 30): an exercise's report, pairs ranked, most
similar first; a pair side by side with the matching regions marked; one button that
flags both submissions `suspicious`. Runs are computed apart (server/similarity/reports.py)."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

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


# a line ends at "\r\n" (what a browser's form sends), "\r" or "\n": splitting at "\n" alone
# left a "\r" inside the last <mark> of a line, which HTML reads as a line break of its own,
# so every marked line of a file sent from the page was followed by a blank one (issue 42)
_BREAK = re.compile(r"\r\n|\r|\n")
_NAME = re.compile(r"[A-Za-z_]\w*")
_SPACE = re.compile(r"\s+")


def _lines(source: str) -> list[tuple[int, int]]:
    """Each line's (start, end) offsets in the source, its line break left out; a final
    line break does not start another line."""
    out, at = [], 0
    for found in _BREAK.finditer(source):
        out.append((at, found.start()))
        at = found.end()
    if at < len(source) or not out:
        out.append((at, len(source)))
    return out


def marked_lines(source: str, spans: list[list[int]]) -> list[Markup]:
    """Each line of the source, escaped, with the parts inside a matching span in <mark>:
    no mark holds a line break, so every line is one line of the view."""
    spans = sorted((max(0, s), min(len(source), e)) for s, e in spans)
    out = []
    for start, end in _lines(source):
        pieces, at = [], start
        for s, e in spans:
            s, e = max(s, at), min(e, end)  # max(): an overlap (a report stored before
            if s >= e:                      # spans were merged)
                continue
            pieces += [escape(source[at:s]), Markup("<mark>%s</mark>") % source[s:e]]
            at = e
        pieces.append(escape(source[at:end]))
        out.append(Markup("").join(pieces))
    return out


def marked(source: str, spans: list[list[int]]) -> Markup:
    """One file's view alone: each line numbered, its matching parts marked."""
    return Markup("\n").join(Markup('<span class="ln">%d</span>') % number + line
                             for number, line in enumerate(marked_lines(source, spans), 1))


def _shape(line: str) -> str:
    """A line as the alignment compares it: every name one letter and no spacing, as
    copydetect matches code whatever its names (a renamed copy's lines all match)."""
    return _SPACE.sub("", _NAME.sub("N", line))


def aligned(first: list[str], second: list[str]) -> list[tuple[int | None, int | None]]:
    """The rows of the side-by-side view: a line of each file (its index), or None where
    the other file has lines this one lacks. Lines that match (the same once names and
    spacing are left out) share a row, so a copy with lines added stays level with its
    original below them."""
    matcher = SequenceMatcher(None, [_shape(x) for x in first], [_shape(x) for x in second])
    rows: list[tuple[int | None, int | None]] = []
    for _, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):  # unequal runs: side by side, then a gap
            rows.append((i1 + k if i1 + k < i2 else None, j1 + k if j1 + k < j2 else None))
    return rows


def side_by_side(first: str, first_spans: list[list[int]], second: str,
                 second_spans: list[list[int]]) -> tuple[Markup, Markup]:
    """The two files' views, row for row: each line with its number and its matching
    parts marked; a gap (an empty line with no number) faces a line the other file adds."""
    views = (marked_lines(first, first_spans), marked_lines(second, second_spans))
    texts = ([first[s:e] for s, e in _lines(first)], [second[s:e] for s, e in _lines(second)])
    panes: tuple[list[Markup], list[Markup]] = ([], [])
    for row in aligned(*texts):
        for pane, view, index in zip(panes, views, row):
            pane.append(Markup('<span class="ln gap"></span>') if index is None else
                        Markup('<span class="ln">%d</span>') % (index + 1) + view[index])
    return Markup("\n").join(panes[0]), Markup("\n").join(panes[1])


def flags_in_words(first: Submission, second: Submission) -> str:
    """The pair's flags as the page says them ("now: 1 none, 3 none" said nothing)."""
    if first.flag == second.flag:
        return "Neither is flagged." if first.flag == Flag.NONE else \
            f"Both are flagged {first.flag.value}."
    flagged = [s for s in (first, second) if s.flag != Flag.NONE]
    if len(flagged) == 1:
        other = second if flagged[0] is first else first
        return f"Submission {flagged[0].id} is flagged {flagged[0].flag.value}; {other.id} is not."
    return (f"Submission {first.id} is flagged {first.flag.value}, "
            f"{second.id} {second.flag.value}.")


@router.get("/admin/similarity/{exercise}/pair/{a}/{b}", response_class=HTMLResponse)
def similarity_pair(exercise: str, a: DbId, b: DbId, request: Request,
                    user: User = Depends(instructor_page),
                    db: Session = Depends(get_db, scope="function")):
    info = exercise_or_error(request, exercise)
    pair, first, second = _pair_of(db, info.name, a, b)
    done = request.query_params.get("done") == "flagged"
    return render(request, "similarity_pair.html", user, exercise=info.name, pair=pair,
                  first=first, second=second, flagged_at=similarity.FLAGGED, done=done,
                  flags=flags_in_words(first, second),
                  views=side_by_side(first.source, pair["a_spans"], second.source,
                                     pair["b_spans"]))


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
