"""Two server processes against one database (issue 27): what one process commits clears
the other's in-memory views (server/core/shared_state.py), and a worker's progress reported to
one is shown by the other (it is kept on the submission's row).

The other process is real: a Python subprocess that changes the database through the
server's own models and sessions, as a second server would."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from sqlalchemy import select

from conftest import REPO
from server.auth import readers
from server.core import shared_state
from server.domain import board_cache as boards
from server.domain.models import Status, Submission, User
from server.domain.progress import progress_of
from test_server_api import NoDispatch, add_students, running, submit
from test_web_pages import sign_in


def _other_process(database_url: str, code: str) -> None:
    script = textwrap.dedent(f"""
        from server.core.db import make_engine, make_sessionmaker
        from server.domain.models import *
        import server.domain.board_cache, server.auth.readers  # their commit hooks, as in a server
        from sqlalchemy import select
        sessions = make_sessionmaker(make_engine({database_url!r}))
    """) + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_commit_in_another_process_clears_this_ones_leaderboard(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with running(url, dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        sid = submit(client, token).json()["id"]
        with client.app.state.sessionmaker.begin() as db:
            s = db.get(Submission, sid)
            s.status, s.verdict, s.score = Status.GRADED, "passed", 40.0
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [e["score"] for e in board] == [40.0]
        # this test looks at the stamps itself, when it means to: the app's own watcher,
        # every second, would race it to them
        client.app.state.stamp_watcher.stop()
        _other_process(url, f"""
            with sessions.begin() as db:
                db.get(Submission, {sid}).score = 90.0
        """)
        policy = client.app.state.settings.late_policy
        assert boards.cached("safe_softmax", policy) is not None  # not seen yet here
        engine = client.app.state.sessionmaker.kw["bind"]
        assert shared_state.apply_new_stamps(engine) == 1  # what the watcher does each second
        assert boards.cached("safe_softmax", policy) is None
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [e["score"] for e in board] == [90.0]
        assert shared_state.apply_new_stamps(engine) == 0  # nothing new since


def test_a_sign_out_in_another_process_ends_the_session_here(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with running(url, dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        assert "Sign out" in client.get("/leaderboard/safe_softmax").text
        assert readers._remembered  # the reader is served from memory now
        client.app.state.stamp_watcher.stop()  # the test looks at the stamps itself
        _other_process(url, """
            with sessions.begin() as db:  # the session is revoked (signed out elsewhere)
                for session in db.scalars(select(WebSession)):
                    db.delete(session)
        """)
        engine = client.app.state.sessionmaker.kw["bind"]
        shared_state.apply_new_stamps(engine)
        assert not readers._remembered
        assert "Sign out" not in client.get("/leaderboard/safe_softmax").text


def test_progress_reported_to_one_process_is_shown_by_another(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with running(url, dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        sid = submit(client, token).json()["id"]
        _other_process(url, f"""
            from server.domain.progress import record_check
            with sessions.begin() as db:
                s = db.get(Submission, {sid})
                s.status, s.attempts = Status.RUNNING, 1
            record_check(sessions, {sid}, 1, {{"name": "random_rows", "passed": True,
                                               "points": 15, "max_points": 15}})
        """)
        with client.app.state.sessionmaker() as db:
            s = db.get(Submission, sid)
            shown = progress_of(client, db, s)
            assert db.scalar(select(User.username).where(User.id == s.user_id)) == "ada"
        assert shown["checks"] == [{"name": "random_rows", "passed": True, "points": 15,
                                    "max_points": 15}]
