"""SQLAlchemy 2 models. The database is the truth for every submission's state."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import (JSON, Boolean, DateTime, Enum, Float, ForeignKey, Index, Integer, String,
                        Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from ..core.clock import utcnow


class Base(DeclarativeBase):
    pass


class Role(str, enum.Enum):
    STUDENT = "student"
    INSTRUCTOR = "instructor"


class Status(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    GRADED = "graded"
    ERROR = "error"  # the grader failed repeatedly: not counted against the student


class Flag(str, enum.Enum):
    NONE = "none"
    SUSPICIOUS = "suspicious"
    INVALIDATED = "invalidated"


def _enum(cls):
    return Enum(cls, values_callable=lambda e: [m.value for m in e], native_enum=False, length=20)


# what a roster accepts as a username (server/domain/roster.py); anything else names no student
USERNAME_PATTERN = r"[A-Za-z0-9_.@-]{1,64}"


class User(Base):
    __tablename__ = "users"
    __table_args__ = (Index("ix_users_token_hash", "token_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    display_name: Mapped[str] = mapped_column(String(128))
    role: Mapped[Role] = mapped_column(_enum(Role))
    # unique (a constraint) and indexed apart, as the migrations made it
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WebSession(Base):
    """A signed-in browser: its cookie holds a token of its own, never the user's API token,
    so that signing out ends it (the API token stays valid for curl)."""

    __tablename__ = "web_sessions"
    __table_args__ = (Index("ix_web_sessions_token_hash", "token_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    # unique (a constraint) and indexed apart, as the migrations made it
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                 index=True)
    # the user's API token (its hash) the session was made with: a re-issued token ends it
    user_token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Submission(Base):
    __tablename__ = "submissions"
    # the leaderboard's read (migration 0003)
    __table_args__ = (Index("ix_submissions_board", "exercise", "status", "flag", "user_id",
                            "score"),
                      Index("ix_submissions_regrade", "regrade_pending", "status"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    exercise: Mapped[str] = mapped_column(String(64), index=True)
    language: Mapped[str] = mapped_column(String(16))
    filename: Mapped[str] = mapped_column(String(128))
    source: Mapped[str] = mapped_column(Text)
    status: Mapped[Status] = mapped_column(_enum(Status), index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # grader runs started
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    # an instructor asked for a new grading: it waits (status stays graded, the old grade
    # stays on the board) and runs beside new work, not in its place (issue 12)
    regrade_pending: Mapped[bool] = mapped_column(Boolean, default=False)
    flag: Mapped[Flag] = mapped_column(_enum(Flag), default=Flag.NONE)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # remote grading (server/grading/celery_dispatch.py): published to the broker, last heard of
    # from its worker, and which worker (migration 0005)
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    worker: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # the latest result's headline, for the leaderboard and lists
    verdict: Mapped[str | None] = mapped_column(String(32), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the checks ended so far while it runs (server/domain/progress.py): in the database, so that
    # any server process can show what a worker told another one (migration 0008)
    checks_done: Mapped[list | None] = mapped_column(JSON, nullable=True)
    # when the student first tried to hand this work in: an earlier refused try (the queue
    # full, a submission still being graded) when there was one; `late` is decided by it
    first_tried_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                            nullable=True)
    # gradings started and then never heard of again (the worker died or fell silent): a
    # submission that keeps killing its worker ends as `error` after MAX_GRADER_ATTEMPTS
    leases_lost: Mapped[int] = mapped_column(Integer, default=0)

    user: Mapped[User] = relationship()
    results: Mapped[list["GradeRun"]] = relationship(back_populates="submission",
                                                     order_by="GradeRun.id")


class GradeRun(Base):
    """One grader result. A regrade adds a row: the old result is kept beside the new."""

    __tablename__ = "grade_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    verdict: Mapped[str] = mapped_column(String(32))
    score: Mapped[float] = mapped_column(Float)
    result: Mapped[dict] = mapped_column(JSON)
    grader_version: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    submission: Mapped[Submission] = relationship(back_populates="results")


class Extension(Base):
    """One student's later deadline for one exercise (issue 15). At most one per student and
    exercise: granting again replaces it (migration 0006; server/domain/deadlines.py decides)."""

    __tablename__ = "extensions"
    __table_args__ = (UniqueConstraint("user_id", "exercise", name="uq_extensions_user_exercise"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    exercise: Mapped[str] = mapped_column(String(64))
    deadline: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    granted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    granted_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    note: Mapped[str] = mapped_column(String(200), default="")

    user: Mapped[User] = relationship(foreign_keys=[user_id])
    granter: Mapped[User | None] = relationship(foreign_keys=[granted_by])


class RefusedTry(Base):
    """A submission the server refused for want of room (429, 503): when the student tried.

    A refusal near a deadline must not become a late mark when the student tries again
    (issue 27): the next accepted submission of the same exercise, within
    ``REFUSAL_HOLDS_S`` of the first refusal, is judged late or on time by that refusal's
    time (server/domain/admission.py). Consumed by the accepted submission (migration 0008)."""

    __tablename__ = "refused_tries"
    __table_args__ = (Index("ix_refused_tries_user_exercise", "user_id", "exercise"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    exercise: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    reason: Mapped[str] = mapped_column(String(32))  # in_flight | per_hour | queue_full


class ChangeStamp(Base):
    """A counter per in-memory view (a leaderboard, the signed-in readers), raised in the
    transaction that changes what the view shows, so that every server process can tell
    that its copy is stale (server/core/shared_state.py; migration 0008)."""

    __tablename__ = "change_stamps"

    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    stamp: Mapped[int] = mapped_column(Integer, default=0)


class WorkerSeen(Base):
    """A remote worker as the servers last heard of it: in service or not, and why
    (server/grading/celery_dispatch.py; any server process may be the one it spoke to)."""

    __tablename__ = "workers_seen"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    healthy: Mapped[bool] = mapped_column(Boolean, default=True)


class SimilarityReport(Base):
    """One similarity run over an exercise's submissions (server/similarity/reports.py starts it,
    server/similarity/run.py computes it in a process of its own): each student's latest
    submission per language, fingerprinted, every pair compared; the pairs above the floor
    kept, most similar first, with the spans that match in each source."""

    __tablename__ = "similarity_reports"
    __table_args__ = (Index("ix_similarity_reports_exercise", "exercise", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    exercise: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="running")  # running|done|error
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    submissions: Mapped[int] = mapped_column(Integer, default=0)  # how many were compared
    message: Mapped[str] = mapped_column(String(500), default="")
    # [{"a": id, "b": id, "similarity": 0..1, "a_share", "b_share", "a_spans", "b_spans"}]
    pairs: Mapped[list | None] = mapped_column(JSON, nullable=True)
