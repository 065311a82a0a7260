"""Issue 40's parts without an LMS: key rotation and the JWKS, roles, usernames, a
registration's checks, the one-time entry codes, the frame's policy, the grades' backoff.
tests/test_lti.py runs them together against a real platform."""

from __future__ import annotations

import os
import stat
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from server.core.db import make_engine, make_sessionmaker
from server.core.migrate import upgrade
from server.core.settings import Settings
from server.domain.models import Role, User
from server.lti import keys, registry
from server.lti.entry import new_entry, use_entry
from server.lti.grades import LONGEST_WAIT_S, backoff_s, refused_for_good
from server.lti.launch import Refused, check_audience, teaching, user_for, username_for
from server.web.lti import framed_policy

NOW = datetime(2026, 12, 3, 12, tzinfo=timezone.utc)


def test_keys_rotate_and_the_old_one_stays_published_for_a_day(tmp_path):
    settings = Settings(lti_keys_dir=str(tmp_path / "keys"))
    assert keys.jwks(settings) == {"keys": []} and keys.current(settings) is None
    first = keys.rotate(settings)
    assert stat.S_IMODE(os.stat(tmp_path / "keys").st_mode) == 0o700
    for path in (tmp_path / "keys").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # private keys: the owner's only
    second = keys.rotate(settings)
    assert keys.current(settings).kid == second.kid != first.kid
    published = [k["kid"] for k in keys.jwks(settings)["keys"]]
    assert published == [first.kid, second.kid]
    assert all("d" not in k for k in keys.jwks(settings)["keys"]), "never a private part"
    later = second.made_at + keys.KEEP_OLD + timedelta(seconds=1)
    assert [k["kid"] for k in keys.jwks(settings, now=later)["keys"]] == [second.kid]


@pytest.mark.parametrize("roles, teaches", [
    (["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], False),
    (["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"], True),
    (["http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"], True),
    (["http://purl.imsglobal.org/vocab/lis/v2/membership#Administrator"], True),
    # institution and system roles do not make anyone this course's instructor
    (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"], False),
    (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor",
      "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], False),
    (["http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator"], False),
    (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Student",
      "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], False),
    (["Instructor"], True),
    ([], False),
    (["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"], False),
])
def test_roles_that_teach_become_instructors(roles, teaches):
    assert teaching(roles) is teaches


@pytest.mark.parametrize("body, words", [
    ({"aud": "other", "exp": 1, "iat": 1}, "another tool"),
    ({"aud": ["client-1", "other"], "exp": 1, "iat": 1}, "authorized party"),
    ({"aud": ["client-1", "other"], "azp": "other", "exp": 1, "iat": 1}, "authorized party"),
    ({"aud": "client-1", "azp": "other", "exp": 1, "iat": 1}, "authorized party"),
    ({"aud": "client-1", "iat": 1}, "no exp"),
    ({"aud": "client-1", "exp": 1}, "no iat"),
])
def test_a_token_for_another_audience_is_refused(body, words):
    with pytest.raises(Refused, match=words):
        check_audience(body, "client-1")
    check_audience({"aud": ["client-1", "x"], "azp": "client-1", "exp": 1, "iat": 1}, "client-1")


@pytest.fixture
def db(database_url):
    """A session on a migrated database: SQLite, then PostgreSQL (tests/conftest.py)."""
    engine = make_engine(database_url)
    upgrade(engine)
    with make_sessionmaker(engine)() as session:
        yield session
    engine.dispose()


def _fields(**changes) -> registry.PlatformFields:
    base = dict(issuer="https://canvas.instructure.com", client_id="10000000000001",
                deployment_ids=("1:abc",), auth_login_url="https://sso.example/authorize",
                auth_token_url="https://sso.example/token", key_set_url="https://sso.example/jwks")
    return registry.PlatformFields(**{**base, **changes})


def test_a_registration_is_checked_and_updated_in_place(db):
    for wrong, words in [({"deployment_ids": ()}, "deployment"),
                         ({"auth_login_url": "sso.example/authorize"}, "full http"),
                         ({"client_id": " "}, "client id")]:
        with pytest.raises(registry.Unregistrable, match=words):
            registry.register(db, _fields(**wrong))
        db.rollback()
    first = registry.register(db, _fields(frame_origins=("https://school.instructure.com/x",)))
    db.commit()
    assert first.frame_origins == ["https://school.instructure.com"]  # an origin, no path
    again = registry.register(db, _fields(deployment_ids=("1:abc", "2:def")))
    db.commit()
    assert again.id == first.id and again.deployment_ids == ["1:abc", "2:def"]
    assert again.frame_origins == ["https://canvas.instructure.com"]  # the issuer's
    assert registry.find(db, "https://canvas.instructure.com", None).id == first.id
    registry.register(db, _fields(client_id="2"))
    db.commit()
    assert registry.find(db, "https://canvas.instructure.com", None) is None  # which one?
    assert registry.find(db, "https://canvas.instructure.com", "2").client_id == "2"


def test_one_lms_user_is_one_user_here_whatever_their_id_looks_like(db):
    platform = registry.register(db, _fields())
    db.flush()
    ada = user_for(db, platform, "a1b2", "Ada", teaches=False)
    assert ada.username == f"lti{platform.id}.a1b2" and ada.role is Role.STUDENT
    sub = "ünïcode user/with spaces " + "x" * 80  # no roster username: a stable hash of it
    odd = user_for(db, platform, sub, "Odd", teaches=False)
    assert len(odd.username) <= 64 and odd.username == username_for(platform, sub)
    assert user_for(db, platform, sub, "Odd", teaches=False).id == odd.id
    again = user_for(db, platform, "a1b2", "Ada Lovelace", teaches=True)
    assert again.id == ada.id and again.display_name == "Ada Lovelace"
    assert again.role is Role.INSTRUCTOR  # the LMS's word on their role
    kept = user_for(db, platform, "a1b2", "LMS user", teaches=None)  # a roster says no role
    assert kept.role is Role.INSTRUCTOR and kept.display_name == "Ada Lovelace"
    with pytest.raises(Refused, match="no user"):
        user_for(db, platform, "", "Nobody", teaches=False)


def test_an_entry_code_works_once_and_not_for_long(db):
    user = User(username="u", display_name="U", role=Role.STUDENT, token_hash="h" * 64)
    db.add(user)
    db.flush()
    code = new_entry(db, user.id, "/exercises/safe_softmax")
    db.commit()
    assert use_entry(db, code) == {"user_id": user.id, "next": "/exercises/safe_softmax"}
    assert use_entry(db, code) is None
    stale = new_entry(db, user.id, "/me")
    db.execute(text("UPDATE lti_kv SET expires_at = :t"), {"t": NOW - timedelta(days=1)})
    assert use_entry(db, stale) is None
    assert use_entry(db, "not-a-code") is None


def test_the_launch_page_may_be_framed_by_its_lms_only():
    policy = framed_policy(["https://school.instructure.com"])
    assert "frame-ancestors https://school.instructure.com" in policy
    assert "script-src 'self'" in policy and "form-action 'self'" in policy
    assert "frame-ancestors 'none'" in framed_policy([])
    answer = framed_policy(["https://lms"], ("https://lms",))
    assert "form-action 'self' https://lms" in answer


class _Response:
    def __init__(self, status_code):
        self.status_code = status_code


class _Failed(Exception):
    def __init__(self, status_code):
        super().__init__(f"HTTP {status_code}")
        self.response = _Response(status_code)


def test_what_is_tried_again_and_how_soon():
    assert [backoff_s(n) for n in (1, 2, 3)] == [5, 10, 20]
    assert backoff_s(40) == LONGEST_WAIT_S
    assert refused_for_good(_Failed(400)) and refused_for_good(_Failed(404))
    for again in (401, 408, 429, 500, 503):
        assert not refused_for_good(_Failed(again)), again
    assert not refused_for_good(ConnectionError("the LMS is down"))


def _student_and_activity(db):
    """A registered LMS, a student, and one safe_softmax activity of that LMS's."""
    from server.domain.lti_records import LtiLink
    platform = registry.register(db, _fields())
    db.flush()  # the platform's id, for its activity
    student = User(username="st", display_name="St", role=Role.STUDENT, token_hash="t" * 64)
    link = LtiLink(platform_id=platform.id, deployment_id="1:abc", resource_link_id="rl",
                   exercise="safe_softmax")
    db.add_all([student, link])
    db.flush()
    return student, link


def test_one_score_is_sent_by_one_server_process(db):
    """Each server process runs a sender: a score due is claimed by one of them only."""
    from sqlalchemy import select

    from server.domain.lti_records import LtiScore
    from server.lti.grades import Sender
    user, link = _student_and_activity(db)
    db.add(LtiScore(link_id=link.id, user_id=user.id, sub="s", wanted=50.0, state="pending",
                    tries=0, next_try_at=NOW, last_error=""))
    db.commit()
    sessions = make_sessionmaker(db.get_bind())
    seen = db.scalar(select(LtiScore.next_try_at))
    one, other = (Sender(sessions, Settings()) for _ in range(2))
    assert one._claim(1, seen) is True
    assert other._claim(1, seen) is False  # it read the row before the claim: not its own


def test_a_score_is_owed_when_it_is_news_and_only_then():
    from server.domain.lti_records import LtiScore
    from server.lti.grades import _set_wanted
    row = LtiScore(state="sent", sent=None, wanted=None, tries=0)
    assert _set_wanted(row, None) == 0 and row.state == "sent"  # nothing scored yet
    assert _set_wanted(row, 40.0) == 1 and row.state == "pending"
    row.state, row.sent = "sent", 40.0  # the sender sent it
    assert _set_wanted(row, 40.0) == 0 and row.state == "sent"  # the same: nothing
    assert _set_wanted(row, 90.0) == 1
    assert _set_wanted(row, 40.0) == 0 and row.state == "sent"  # back to what the LMS has
    row.state, row.wanted, row.tries = "failed", 90.0, 7  # the LMS refused 90 for good
    assert _set_wanted(row, 90.0) == 0 and row.state == "failed"  # not again by itself
    assert _set_wanted(row, 95.0) == 1 and row.tries == 0  # a new score is tried anew


def test_a_clock_ahead_is_said_as_such():
    from server.lti.launch import why
    assert "clocks is off" in why(Exception("Can't decode id_token: The token is not yet "
                                            "valid (iat)"))
    assert "expired" in why(Exception("Can't decode id_token: Signature has expired"))


def test_a_grading_that_changes_a_score_owes_it_in_its_own_transaction(db):
    """The commit that stores a grade also sets what each of the student's LMS activities
    should show (stored before sent): on SQLite and on PostgreSQL (its row lock)."""
    from server.domain.lti_records import LtiScore
    from server.domain.models import Status, Submission
    from server.lti.grades import follow
    student, link = _student_and_activity(db)
    row = follow(db, link, student.id, "lms-sub", "on_time_first")
    db.commit()
    assert row.state == "sent" and row.wanted is None  # nothing scored: nothing owed

    def graded(score):
        s = Submission(user_id=student.id, exercise="safe_softmax", language="triton",
                       filename="solution.py", source="x", status=Status.RUNNING, attempts=1)
        db.add(s)
        db.commit()
        s.status, s.verdict, s.score = Status.GRADED, "passed", score  # what store() does
        db.commit()
        return s

    graded(60.0)
    db.expire_all()
    row = db.get(LtiScore, row.id)
    assert (row.wanted, row.state) == (60.0, "pending")
    row.state, row.sent = "sent", 60.0  # the sender's part
    db.commit()
    graded(40.0)  # worse: the best still counts, nothing owed
    db.expire_all()
    assert (db.get(LtiScore, row.id).wanted, db.get(LtiScore, row.id).state) == (60.0, "sent")
    graded(95.0)
    db.expire_all()
    assert (db.get(LtiScore, row.id).wanted, db.get(LtiScore, row.id).state) == (95.0, "pending")
