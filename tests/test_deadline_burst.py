"""A deadline's rush (issue 27): refusals for want of room never become late marks.

Hundreds of students submit around a deadline. The queue is at its bound, so some are
refused (503); the others' first submission is still being graded when they try again
(429). After the deadline the graders catch up and every student tries once more: each of
them first tried before the deadline, so none is late. The admission clock
(server/admission.now) is moved by the test, so nothing here waits on the wall clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select, update

from server.domain import admission
from server.domain.models import RefusedTry, Status, Submission
from test_server_api import ADMIN, NoDispatch, add_students, auth, running, submit

DEADLINE = datetime(2026, 12, 4, 23, 59, tzinfo=timezone.utc)
STUDENTS, QUEUE_BOUND = 240, 160


class Clock:
    def __init__(self, monkeypatch):
        self.at = DEADLINE
        monkeypatch.setattr(admission, "now", lambda: self.at)

    def set(self, delta: timedelta) -> None:
        self.at = DEADLINE + delta


def _grade_everything(client) -> None:
    """The graders catch up: every waiting submission is graded."""
    with client.app.state.sessionmaker.begin() as db:
        db.execute(update(Submission).where(Submission.status == Status.QUEUED)
                   .values(status=Status.GRADED, verdict="passed", score=100.0))


@pytest.fixture
def rush(tmp_path, monkeypatch):
    clock = Clock(monkeypatch)
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch(),
                 max_queue_depth=QUEUE_BOUND, submissions_per_hour=20,
                 deadlines={"safe_softmax": DEADLINE.isoformat()}) as client:
        names = [f"s{i:03d}" for i in range(STUDENTS)]
        tokens = add_students(client, *names)
        yield clock, client, names, tokens


def test_no_refusal_near_the_deadline_becomes_a_late_mark(rush):
    clock, client, names, tokens = rush
    clock.set(-timedelta(minutes=10))
    first = {n: submit(client, tokens[n]) for n in names}
    codes = sorted({r.status_code for r in first.values()})
    assert codes == [202, 503]  # the queue filled: some were refused
    queued = {n for n, r in first.items() if r.status_code == 202}
    assert len(queued) == QUEUE_BOUND
    assert "This try is recorded" in next(r for r in first.values()
                                          if r.status_code == 503).json()["detail"]

    clock.set(-timedelta(minutes=1))  # the last minute: everyone tries again
    second = {n: submit(client, tokens[n]) for n in names}
    assert {second[n].status_code for n in queued} == {429}  # still being graded
    assert {second[n].status_code for n in set(names) - queued} == {503}  # still full

    # after the deadline the graders catch up, a queue's worth a minute; each student tries
    # until taken (some are refused once more: the queue fills again)
    third, minute = {}, 5
    while len(third) < STUDENTS:
        clock.set(timedelta(minutes=minute))
        _grade_everything(client)
        for n in names:
            if n not in third:
                r = submit(client, tokens[n])
                assert r.status_code in (202, 503), r.text
                if r.status_code == 202:
                    third[n] = r
        minute += 1
    assert minute > 6  # some were refused after the deadline too
    late = [n for n, r in third.items() if r.json()["late"]]
    assert late == []  # every one of them first tried before the deadline
    # judged by the first refused try: the queue-full ones by 10 minutes before
    tried = {third[n].json()["first_tried_at"] for n in set(names) - queued}
    assert tried == {(DEADLINE - timedelta(minutes=10)).isoformat()}
    tried = {third[n].json()["first_tried_at"] for n in queued}
    assert tried == {(DEADLINE - timedelta(minutes=1)).isoformat()}
    with client.app.state.sessionmaker() as db:  # the refusals were used up
        assert db.scalars(select(RefusedTry)).all() == []
    # and the board says the same
    _grade_everything(client)
    board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
    assert len(board) == STUDENTS and not any(e["late"] for e in board)
    metrics = client.get("/metrics").text
    assert 'autograder_refusals_total{reason="queue_full"} ' in metrics
    assert 'autograder_refusals_total{reason="in_flight"} ' in metrics


def test_work_first_tried_after_the_deadline_or_long_after_a_refusal_is_late(rush):
    clock, client, names, tokens = rush
    early, newcomer = names[0], names[1]
    clock.set(-timedelta(minutes=2))
    assert submit(client, tokens[early]).status_code == 202
    assert submit(client, tokens[early]).status_code == 429  # refused: held from here
    clock.set(timedelta(minutes=30))
    _grade_everything(client)
    assert submit(client, tokens[newcomer]).json()["late"] is True  # never tried before
    clock.set(timedelta(minutes=61))  # past REFUSAL_HOLDS_S (an hour) after the refusal
    assert submit(client, tokens[early]).json()["late"] is True


def test_the_limits_count_per_exercise(rush):
    clock, client, names, tokens = rush
    clock.set(-timedelta(hours=3))
    ada = tokens[names[0]]
    assert submit(client, ada).status_code == 202
    # one safe_softmax in flight does not hold back masked_softmax
    other = submit(client, ada, exercise="masked_softmax")
    assert other.status_code == 202, other.text
    again = submit(client, ada)
    assert again.status_code == 429 and "safe_softmax submission" in again.json()["detail"]


def test_an_error_is_not_counted_against_the_hour(tmp_path, monkeypatch):
    Clock(monkeypatch).set(-timedelta(hours=3))
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch(),
                 submissions_per_hour=1) as client:
        token = add_students(client, "ada")["ada"]
        assert submit(client, token).status_code == 202
        with client.app.state.sessionmaker.begin() as db:  # the graders failed on it
            db.execute(update(Submission).values(status=Status.ERROR))
        assert submit(client, token).status_code == 202
        with client.app.state.sessionmaker.begin() as db:
            db.execute(update(Submission).where(Submission.status == Status.QUEUED)
                       .values(status=Status.GRADED, verdict="passed", score=1.0))
        assert submit(client, token).status_code == 429  # a graded one counts
        assert client.get("/api/exercises", headers=auth(ADMIN)).status_code == 200
