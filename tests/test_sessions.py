"""Browser sessions end (issue 26, item 4).

Found: after the instructor re-issued a student's token, or ADMIN_TOKEN changed, the
browser session made with the old token still read `/me`, `/admin` and `export.csv`; a
session never expired; 200 sign-ins left 200 rows.
"""

import re
from datetime import timedelta

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select, update
from starlette.testclient import TestClient

from server.app import create_app
from server.auth import readers, sessions
from server.auth.sessions import COOKIE, MAX_SESSIONS_PER_USER
from server.core.clock import utcnow
from server.core.db import make_engine
from server.core.migrate import upgrade
from server.domain import lti_records  # noqa: F401 - the LTI tables are in the metadata too
from server.domain.models import Base, User, WebSession
from test_server_api import ADMIN, add_students, running, settings_for
from test_web_pages import form_token, sign_in


def _reads_as(client, cookie: str) -> int:
    """The status of the student's own submissions list, read with only this cookie."""
    client.cookies.clear()
    client.cookies.set(COOKIE, cookie)
    return client.get("/api/submissions").status_code


def _age_sessions(client, by: timedelta) -> None:
    """Every session made ``by`` earlier than it was (in Python: SQLite has no interval)."""
    with client.app.state.sessionmaker.begin() as db:
        for session in db.scalars(select(WebSession)):
            session.created_at -= by


def test_re_issuing_a_students_token_ends_their_browser_sessions(database_url):
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        cookie = client.cookies[COOKIE]
        assert _reads_as(client, cookie) == 200
        add_students(client, "ada")  # the instructor issues Ada a new token
        assert _reads_as(client, cookie) == 401
        client.cookies.clear()
        page = client.get("/me", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/signin")


def test_a_session_counts_only_while_its_token_is_the_users(tmp_path):
    """However the token changes (here in the database itself), the session goes with it."""
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        cookie = client.cookies[COOKIE]
        with client.app.state.sessionmaker.begin() as db:
            db.execute(update(User).where(User.username == "ada").values(token_hash="0" * 64))
        assert _reads_as(client, cookie) == 401


def test_a_new_admin_token_signs_the_old_ones_browsers_out(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with running(url) as client:
        sign_in(client, ADMIN)
        cookie = client.cookies[COOKIE]
        client.cookies.clear()
        client.cookies.set(COOKIE, cookie)
        assert client.get("/admin", follow_redirects=False).status_code == 200
    with TestClient(create_app(settings_for(url, admin_token="a-brand-new-admin-token"))) as client:
        client.cookies.set(COOKIE, cookie)
        assert client.get("/admin", follow_redirects=False).status_code == 303
        assert client.get("/api/admin/export.csv").status_code == 401
        with client.app.state.sessionmaker() as db:
            assert db.scalar(select(func.count()).select_from(WebSession)) == 0


def test_a_session_expires(database_url):
    with running(database_url, session_days=14) as client:
        token = add_students(client, "ada")["ada"]
        answer = client.post("/signin", data={"token": token,
                                              "csrf": form_token(client, "/signin")},
                             follow_redirects=False)
        assert answer.status_code == 303
        assert f"Max-Age={14 * 86400}" in answer.headers["set-cookie"]  # the browser's too
        cookie = client.cookies[COOKIE]
        _age_sessions(client, timedelta(days=13, hours=23))
        assert _reads_as(client, cookie) == 200
        _age_sessions(client, timedelta(hours=2))
        assert _reads_as(client, cookie) == 401


def test_sign_ins_keep_the_table_bounded(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        tokens = add_students(client, "ada", "bob")
        sign_in(client, tokens["bob"])
        _age_sessions(client, timedelta(days=30))  # Bob's session is long expired
        cookies = []
        for _ in range(200):
            client.cookies.clear()
            sign_in(client, tokens["ada"])
            cookies.append(client.cookies[COOKIE])
        with client.app.state.sessionmaker() as db:
            assert db.scalar(select(func.count()).select_from(WebSession)) \
                == MAX_SESSIONS_PER_USER
        assert _reads_as(client, cookies[-1]) == 200
        assert _reads_as(client, cookies[-MAX_SESSIONS_PER_USER]) == 200
        assert _reads_as(client, cookies[0]) == 401  # the oldest went first


def test_the_migrations_build_the_models_tables(database_url):
    engine = make_engine(database_url)
    upgrade(engine)
    with engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert differences == []


def _leaderboard_reader(client) -> str | None:
    """Whose name the leaderboard page's header shows (it keeps readers in memory:
    server/auth/readers.py), or None when it reads as signed out."""
    page = client.get("/leaderboard/safe_softmax").text
    match = re.search(r"<span>([^<]+)</span>", page[:page.index("<main")])
    return match.group(1) if match else None


def test_the_leaderboard_page_forgets_a_session_the_moment_it_ends(tmp_path, monkeypatch):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        tokens = add_students(client, "ada", "bob")
        sign_in(client, tokens["ada"])
        assert _leaderboard_reader(client) == "Ada"
        assert _leaderboard_reader(client) == "Ada"  # now from memory
        add_students(client, "ada")  # re-issued
        assert _leaderboard_reader(client) is None
        sign_in(client, tokens["bob"])
        assert _leaderboard_reader(client) == "Bob"
        client.post("/signout", data={"csrf": form_token(client, "/exercises")})
        assert _leaderboard_reader(client) is None
        sign_in(client, tokens["bob"])
        assert _leaderboard_reader(client) == "Bob"
        later = utcnow() + timedelta(days=14, minutes=1)  # expired, remembered or not
        for module in (sessions, readers):
            monkeypatch.setattr(module, "utcnow", lambda: later)
        assert _leaderboard_reader(client) is None
