"""Grades back to the LMS (LTI AGS): each (activity, student)'s score, stored before sent.

When a transaction changes a student's submissions (a grading ends, a regrade, a flag, an
extension re-marking late work), the same transaction brings up to date what each of that
student's LMS activities for the exercise should show (``lti_scores.wanted``): the score
the leaderboard and the CSV count under the course's late policy. So a score to send is in
the database the moment the grade is, and a crash loses neither.

The ``Sender`` thread sends what is owed: a row whose ``wanted`` differs from what the LMS
was last sent. A send the LMS does not take is tried again with backoff (the LMS down, a
timeout, a 5xx, an expired token); one it refuses for good (a 4xx) is ``failed``, for the
instructor's page. A score is marked sent only if it is still the one wanted, so one that
changed while it travelled is sent again, and an equal one never twice.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

import requests
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiException, LtiServiceException
from pylti1p3.grade import Grade
from pylti1p3.service_connector import ServiceConnector
from sqlalchemy import case, event, select, update
from sqlalchemy.orm import Session, sessionmaker

from ..core.clock import as_utc, utcnow
from ..core.commit_hooks import note_bulk_writes, on_commit
from ..core.settings import Settings
from ..domain.leaderboard import counted_score
from ..domain.lti_records import LtiLink, LtiPlatform, LtiScore
from ..domain.models import Submission
from .adapter import TimedSession
from .registry import Unregistrable, registration_of

log = logging.getLogger("server.lti")

SCORE_MAXIMUM = 100.0
FIRST_WAIT_S, LONGEST_WAIT_S = 5.0, 3600.0
GIVE_UP_AFTER = timedelta(days=1)  # of tries that did not go through: failed, an admin looks
BATCH = 20
# a claimed score is another process's again after this: far longer than a send takes (its
# token request and its post, each adapter.HTTP_TIMEOUT_S a socket operation)
CLAIM_S = 600
_TOUCHED = "lti_touched_students"  # session.info: (user id, exercise) this transaction changed
_OWED = "lti_scores_owed"  # session.info: this transaction left scores to send
_BULK = "lti_bulk_submission_writes"  # session.info: an UPDATE of rows no object stands for
RECONCILE_EVERY_S = 300.0
_policy = {"late_policy": "on_time_first"}  # the server's, set when its sender starts
_senders: list["Sender"] = []  # woken when a commit left scores to send


def backoff_s(tries: int) -> float:
    return min(LONGEST_WAIT_S, FIRST_WAIT_S * 2 ** max(0, tries - 1))


# -- the score owed, kept in step with the submissions ---------------------------------------

@event.listens_for(Session, "before_flush")
def _note_submissions(session: Session, flush_context, instances) -> None:
    for obj in [*session.new, *session.dirty]:
        if isinstance(obj, Submission) and obj.user_id is not None:
            session.info.setdefault(_TOUCHED, set()).add((obj.user_id, obj.exercise))


@event.listens_for(Session, "before_commit")
def _bring_scores_up_to_date(session: Session) -> None:
    touched = session.info.pop(_TOUCHED, None)
    if touched:
        session.flush()
        if owe(session, touched, _policy["late_policy"]):
            session.info[_OWED] = True


# A bulk UPDATE of submissions names no rows (an extension's re-marking of late work): the
# sender goes over every followed score soon after, on its own thread. Not for one that
# changes nothing a leaderboard shows, so nothing a score is made of (``board_neutral``: a
# claim, a lease's heartbeat, a requeue), which run every few seconds
note_bulk_writes(_BULK, "all", (Submission,), unless="board_neutral")
on_commit(_BULK, lambda _: [sender.reconcile_soon() or sender.wake()
                            for sender in list(_senders)])


@event.listens_for(Session, "after_commit")
def _wake_senders(session: Session) -> None:
    if session.info.pop(_OWED, None):
        for sender in list(_senders):
            sender.wake()


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    for key in (_TOUCHED, _OWED):
        session.info.pop(key, None)


def owe(db: Session, students: set[tuple[int, str]], policy: str) -> int:
    """Set what each LMS activity of these (student, exercise) pairs should show; how many
    scores are now owed."""
    users = {u for u, _ in students}
    # locked first (PostgreSQL), then computed: of two transactions grading one student at
    # once, the second computes after the first committed, and so counts both
    rows = db.execute(select(LtiScore, LtiLink.exercise)
                      .join(LtiLink, LtiLink.id == LtiScore.link_id)
                      .where(LtiScore.user_id.in_(users))
                      .with_for_update(of=LtiScore)).all()
    owed = 0
    for row, exercise in rows:
        if (row.user_id, exercise) in students:
            owed += _set_wanted(row, counted_score(db, exercise, policy, row.user_id))
    return owed


def _set_wanted(row: LtiScore, score: float | None) -> int:
    """Owe ``score`` if it is news: a score other than the one already wanted (a failed one
    stays failed until its score changes or an instructor retries), or one the LMS lacks."""
    news = score != row.wanted or (row.state == "sent" and score != row.sent)
    row.wanted = score
    if row.state == "pending" and score == row.sent:  # back to what the LMS has: nothing owed
        row.state = "sent"
    elif score is not None and news and score != row.sent:
        # updated_at: since when it is owed (a day of failed tries from there: given up)
        row.state, row.tries, row.next_try_at, row.last_error = "pending", 0, utcnow(), ""
        row.updated_at = utcnow()
    return int(row.state == "pending")


def follow(db: Session, link: LtiLink, user_id: int, sub: str, policy: str) -> LtiScore:
    """This student's score on this activity is followed from now on (their first launch of
    it): what they have already earned is owed at once."""
    row = db.scalar(select(LtiScore).where(LtiScore.link_id == link.id,
                                           LtiScore.user_id == user_id))
    if row is None:
        row = LtiScore(link_id=link.id, user_id=user_id, sub=sub, state="sent", tries=0,
                       next_try_at=utcnow(), last_error="")
        db.add(row)
    _set_wanted(row, counted_score(db, link.exercise, policy, user_id))
    return row


def reconcile(db: Session, policy: str) -> int:
    """Every followed score against the submissions (after a change no transaction
    noted: a bulk regrade, a late policy changed at a restart)."""
    pairs = {(r.user_id, r.exercise) for r in db.execute(
        select(LtiScore.user_id, LtiLink.exercise).join(LtiLink, LtiLink.id == LtiScore.link_id))}
    return owe(db, pairs, policy) if pairs else 0


# -- the sending ---------------------------------------------------------------------------

def grade_for(score: float, sub: str, at: datetime) -> Grade:
    return (Grade().set_score_given(score).set_score_maximum(SCORE_MAXIMUM)
            .set_activity_progress("Completed").set_grading_progress("FullyGraded")
            .set_user_id(sub).set_timestamp(at.isoformat(timespec="milliseconds")))


def refused_for_good(exc: Exception) -> bool:
    """The LMS said no in a way another try will not change (a 4xx but for an expired
    token, a timeout or too many requests)."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status is not None and 400 <= status < 500 and status not in (401, 408, 429)


class Sender:
    """A thread that sends owed scores; ``wake()`` after a commit that owed some."""

    def __init__(self, sessions: sessionmaker[Session], settings: Settings,
                 every_s: float = 2.0):
        self.sessions, self.settings, self.every_s = sessions, settings, every_s
        _policy["late_policy"] = settings.late_policy
        self._wake = threading.Event()
        self._reconcile = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        _senders.append(self)
        with self.sessions.begin() as db:  # what changed while no server ran
            reconcile(db, self.settings.late_policy)
        self._thread = threading.Thread(target=self._run, name="lti-grades", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self in _senders:
            _senders.remove(self)
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=20)

    def wake(self) -> None:
        self._wake.set()

    def reconcile_soon(self) -> None:
        self._reconcile.set()

    def _run(self) -> None:
        last_reconciled = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(self.every_s)
            self._wake.clear()
            try:
                if self._reconcile.is_set() or \
                        time.monotonic() - last_reconciled > RECONCILE_EVERY_S:
                    self._reconcile.clear()
                    last_reconciled = time.monotonic()
                    with self.sessions.begin() as db:
                        reconcile(db, self.settings.late_policy)
                while self.send_due() == BATCH and not self._stop.is_set():
                    pass
            except Exception:  # noqa: BLE001 - a database hiccup must not end the sending
                log.exception("sending scores to the LMS failed")

    def send_due(self) -> int:
        """Send the scores due now (at most BATCH); how many were tried."""
        with self.sessions() as db:
            due = db.execute(select(LtiScore.id, LtiScore.sub, LtiScore.wanted, LtiScore.tries,
                                    LtiScore.updated_at, LtiScore.next_try_at, LtiLink.ags,
                                    LtiPlatform)
                             .join(LtiLink, LtiLink.id == LtiScore.link_id)
                             .join(LtiPlatform, LtiPlatform.id == LtiLink.platform_id)
                             .where(LtiScore.state == "pending",
                                    LtiScore.next_try_at <= utcnow())
                             .order_by(LtiScore.next_try_at).limit(BATCH)).all()
        connectors: dict[int, ServiceConnector] = {}  # one token per platform and round
        for score_id, sub, wanted, tries, since, seen_next, ags, platform in due:
            if self._claim(score_id, seen_next):
                self._send_one(score_id, sub, wanted, tries, since, ags, platform, connectors)
        return len(due)

    def _claim(self, score_id: int, seen_next: datetime) -> bool:
        """This process sends it, no other (each server process has a sender): the row is
        pushed back by a lease, if it is still as this process read it."""
        with self.sessions.begin() as db:
            return db.execute(update(LtiScore).where(LtiScore.id == score_id,
                                                     LtiScore.state == "pending",
                                                     LtiScore.next_try_at == seen_next)
                              .values(next_try_at=utcnow() + timedelta(seconds=CLAIM_S))
                              ).rowcount == 1

    def _send_one(self, score_id, sub, wanted, tries, since, ags, platform, connectors):
        error, for_good = "", False
        try:
            if not ags or not ags.get("lineitem"):
                raise LtiException("the activity's launches gave no line item (the LMS did not "
                                   "grant this tool its grade service)")
            if platform.id not in connectors:
                connectors[platform.id] = ServiceConnector(
                    registration_of(platform, self.settings), TimedSession())
            AssignmentsGradesService(connectors[platform.id], ags).put_grade(
                grade_for(wanted, sub, utcnow()))
        except (LtiServiceException, requests.RequestException) as exc:
            error, for_good = str(exc)[:1000], refused_for_good(exc)
        except (LtiException, Unregistrable) as exc:  # no line item, no key: an admin acts
            error, for_good = str(exc)[:1000], True
        with self.sessions.begin() as db:
            if not error:  # the LMS has ``wanted`` now; owed still if it changed meanwhile
                db.execute(update(LtiScore).where(LtiScore.id == score_id).values(
                    sent=wanted, tries=0, last_error="", next_try_at=utcnow(),
                    updated_at=utcnow(),
                    state=case((LtiScore.wanted == wanted, "sent"),
                               (LtiScore.wanted.is_(None), "sent"), else_="pending")))
                log.info("score %s sent to %s for %s", wanted, platform.issuer, sub)
                return
            give_up = for_good or utcnow() - as_utc(since) > GIVE_UP_AFTER
            db.execute(update(LtiScore).where(LtiScore.id == score_id,
                                              LtiScore.state == "pending")
                       .values(state="failed" if give_up else "pending", tries=tries + 1,
                               last_error=error,
                               next_try_at=utcnow() + timedelta(seconds=backoff_s(tries + 1))))
            log.warning("score for %s not taken by %s (try %d%s): %s", sub, platform.issuer,
                        tries + 1, ", given up" if give_up else "", error)


def retry_failed(db: Session) -> int:
    """An instructor's "try again": the failed scores are owed again now."""
    return db.execute(update(LtiScore).where(LtiScore.state == "failed")
                      .values(state="pending", tries=0, next_try_at=utcnow(),
                              updated_at=utcnow())).rowcount
