"""The instructor's class view and submissions list (issue 42): every student with their
counted score per exercise, and the submissions sorted and paged.

Both are read with SQL aggregation and LIMIT/OFFSET, never by loading every submission:
a page costs a COUNT, at most one grouped scan of the submissions (to sort by them), and
the page's own rows; the same on SQLite and PostgreSQL (NULLs placed explicitly, as the two
order them apart). At 10,000 submissions and 300 students each list reads in 2-30 ms.

A cell's score is the one that counts, by the course's late policy, as on the leaderboard
and in the CSV (server/domain/leaderboard.py): graded (or graded and being regraded), not
flagged, scored (not HIP only compiled); on-time work before late under on_time_first,
late work never under on_time_only; ties go to the on-time one (the earlier)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, case, exists, func, select
from sqlalchemy.orm import Session

from ..core.clock import as_utc
from .deadlines import StudentDeadline, applying
from .formatting import NOT_SCORED
from .models import Extension, Flag, Role, Submission, User
from .submissions import on_the_board, scored

PAGE_SIZES = (25, 50, 100, 200)  # the page's menu; any other size is refused

# the submissions list's sorts, and the order a column starts in when first chosen
SUBMISSION_SORTS = {"time": "desc", "student": "asc", "exercise": "asc", "score": "desc",
                    "verdict": "asc"}
# the class view's: by name, by last submission, by how many, or by one exercise's counted
# score ("score:<exercise>", which starts with the best)
CLASS_SORTS = {"name": "asc", "last": "asc", "submissions": "asc"}
SCORE_SORT = "score:"


@dataclass(frozen=True)
class Paged:
    rows: list
    total: int  # rows over every page
    page: int  # 1-based; a page past the last is the last
    pages: int
    size: int


def _page(total: int, page: int, size: int) -> tuple[int, int]:
    pages = max(1, -(-total // size))
    return min(max(page, 1), pages), pages


def _ordered(column, order: str, nulls: str = "dir"):
    """``column`` in ``order``; NULLs (nothing yet) first when ascending and last when
    descending, or always last (``nulls="last"``)."""
    ordered = column.asc() if order == "asc" else column.desc()
    if nulls == "last" or order == "desc":
        return ordered.nulls_last()
    return ordered.nulls_first()


def _score_shown():
    """A submission's score as lists order it: none for a verdict that gives none."""
    return case((Submission.verdict.in_(sorted(NOT_SCORED)), None), else_=Submission.score)


def submissions_page(db: Session, query, sort: str, order: str, page: int,
                     size: int) -> Paged:
    """``query`` (server/domain/submissions.py's ``submissions_query``, which joins User)
    sorted by ``sort`` and cut to one page; ties newest first."""
    total = db.scalar(select(func.count()).select_from(query.order_by(None).subquery()))
    page, pages = _page(total, page, size)
    keys = {"time": [Submission.created_at],
            "student": [User.display_name, User.username],
            "exercise": [Submission.exercise],
            "score": [_score_shown()],
            "verdict": [Submission.verdict]}[sort]
    nulls = "dir" if sort == "time" else "last"  # nothing yet sorts after every value
    # the page's ids first, sorted by narrow rows (a sort of whole rows, sources and all,
    # took SQLite 200 ms at 10,000), then those rows
    ids = db.scalars(query.with_only_columns(Submission.id).order_by(None)
                     .order_by(*[_ordered(k, order, nulls) for k in keys],
                               Submission.id.desc())
                     .limit(size).offset((page - 1) * size)).all()
    found = {s.id: s for s in db.scalars(select(Submission).where(Submission.id.in_(ids)))}
    return Paged([found[i] for i in ids], total, page, pages, size)


# -- the class view -------------------------------------------------------------------------

def _counts():
    """The conditions a submission's score counts under, less the late policy."""
    return and_(on_the_board(), Submission.flag == Flag.NONE, scored())


def _best(late: bool):
    return func.max(case((and_(_counts(), Submission.late.is_(late)), Submission.score)))


def _counted(on_time, late, policy: str):
    """The counted score from the best on-time and the best late score (SQL)."""
    if policy == "on_time_only":
        return on_time
    if policy == "on_time_first":
        return func.coalesce(on_time, late)
    return case((on_time.is_(None), late), (late.is_(None), on_time),
                (late > on_time, late), else_=on_time)


@dataclass
class Cell:
    """One student's work on one exercise."""

    tries: int = 0  # submissions, counted or not
    last: datetime | None = None
    score: float | None = None  # the counted score
    late: bool = False  # the counted score is late work
    uncounted_late: bool = False  # late work only, which the policy does not count
    deadline: StudentDeadline | None = None


@dataclass
class StudentRow:
    id: int
    username: str
    display_name: str
    submissions: int
    last: datetime | None
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    students: int
    with_nothing: int  # students with no submission at all
    without: dict[str, int]  # exercise -> students with no submission to it


def class_summary(db: Session, exercises: list[str]) -> Summary:
    """How many students, and how many have nothing (at all, and per exercise)."""
    students = db.scalar(select(func.count()).select_from(User)
                         .where(User.role == Role.STUDENT))
    some = dict(db.execute(select(Submission.exercise, func.count(Submission.user_id.distinct()))
                           .join(User, User.id == Submission.user_id)
                           .where(User.role == Role.STUDENT).group_by(Submission.exercise)).all())
    anything = db.scalar(select(func.count(Submission.user_id.distinct()))
                         .join(User, User.id == Submission.user_id)
                         .where(User.role == Role.STUDENT))
    return Summary(students, students - anything, {e: students - some.get(e, 0)
                                                   for e in exercises})


def class_page(db: Session, course: dict[str, datetime | None], policy: str, sort: str,
               order: str, page: int, size: int, show: str = "") -> Paged:
    """Every student (``show``: "nothing", only those with no submission at all;
    "nothing:<exercise>", none to that exercise), sorted and paged; each with a cell per
    exercise of ``course`` (exercise -> its course deadline).

    The page's students are chosen first: by name from the users alone, by their
    submissions or an exercise's score from one grouped scan; then only their submissions
    are read, grouped by exercise (which also gives their count and last time)."""
    query = select(User.id, User.username, User.display_name).where(User.role == Role.STUDENT)
    if show == "nothing":
        query = query.where(~exists().where(Submission.user_id == User.id))
    elif show.startswith("nothing:"):
        query = query.where(~exists().where(Submission.user_id == User.id,
                                            Submission.exercise == show.split(":", 1)[1]))
    total = db.scalar(select(func.count()).select_from(query.subquery()))
    page, pages = _page(total, page, size)
    if sort.startswith(SCORE_SORT):  # one exercise's counted score
        best = (select(Submission.user_id.label("user_id"),
                       _counted(_best(False), _best(True), policy).label("key"))
                .where(Submission.exercise == sort[len(SCORE_SORT):])
                .group_by(Submission.user_id).subquery())
    elif sort in ("last", "submissions"):
        best = (select(Submission.user_id.label("user_id"),
                       (func.max(Submission.created_at) if sort == "last" else func.count())
                       .label("key")).group_by(Submission.user_id).subquery())
    else:
        best = None
    keys = [User.display_name, User.username]
    if best is not None:
        query = query.outerjoin(best, best.c.user_id == User.id)
        # no submission: none last, or 0 submissions
        key = func.coalesce(best.c.key, 0) if sort == "submissions" else best.c.key
        keys.insert(0, _ordered(key, order))
    elif order == "desc":
        keys = [k.desc() for k in keys]
    rows = [StudentRow(r.id, r.username, r.display_name, 0, None) for r in db.execute(
        query.order_by(*keys).limit(size).offset((page - 1) * size))]
    _fill_cells(db, rows, course, policy)
    return Paged(rows, total, page, pages, size)


def _fill_cells(db: Session, rows: list[StudentRow], course: dict[str, datetime | None],
                policy: str) -> None:
    """Each row's cells: its students' submissions grouped by exercise, in one query, and
    their extensions in another."""
    ids = [r.id for r in rows]
    if not ids:
        return
    granted = {(e.user_id, e.exercise): e
               for e in db.scalars(select(Extension).where(Extension.user_id.in_(ids)))}
    by_id = {r.id: r for r in rows}
    for r in rows:
        r.cells = {name: Cell(deadline=applying(deadline, granted.get((r.id, name))))
                   for name, deadline in course.items()}
    grouped = db.execute(select(Submission.user_id, Submission.exercise, func.count(),
                                func.max(Submission.created_at), _best(False), _best(True))
                         .where(Submission.user_id.in_(ids))
                         .group_by(Submission.user_id, Submission.exercise))
    for user_id, exercise, tries, last, on_time, late in grouped:
        row = by_id[user_id]
        row.submissions += tries
        if last is not None and (row.last is None or as_utc(last) > as_utc(row.last)):
            row.last = last
        cell = row.cells.get(exercise)
        if cell is None:  # an exercise no longer served
            continue
        cell.tries, cell.last = tries, last
        if policy == "on_time_only":
            cell.score, cell.uncounted_late = on_time, on_time is None and late is not None
        elif on_time is None or (policy == "best_counts" and late is not None
                                 and late > on_time):
            cell.score, cell.late = late, late is not None
        else:
            cell.score = on_time
