"""The smaller findings of the hostile-load review (issue 12, item 8), one test each."""

import csv
import io
import os
import stat
import time

import pytest
from pydantic import ValidationError

from test_server_api import ADMIN, add_students, auth, running, settings_for, submit


@pytest.fixture
def client(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        yield client


def test_a_display_name_that_looks_like_a_formula_is_escaped_in_the_csv(client):
    body = {"students": [{"username": "eve", "display_name": "=HYPERLINK(\"http://x\")"},
                         {"username": "mal", "display_name": "+1+cmd|' /C calc'!A0"},
                         {"username": "ok", "display_name": "Ada -Lovelace"}]}
    tokens = {s["username"]: s["token"] for s in client.post(
        "/api/admin/students", json=body, headers=auth(ADMIN)).json()["students"]}
    for name in tokens:
        assert submit(client, tokens[name]).status_code == 202
    # (the fake grader grades at once; wait until every submission has a score)
    for _ in range(200):
        text = client.get("/api/admin/export.csv", headers=auth(ADMIN)).text
        if text.count("\n") >= 4:
            break
    rows = {r["username"]: r for r in csv.DictReader(io.StringIO(text.lstrip("\ufeff")))}
    assert rows["eve"]["display_name"].startswith("'=")
    assert rows["mal"]["display_name"].startswith("'+")
    assert rows["ok"]["display_name"] == "Ada -Lovelace"


def test_the_url_of_a_submission_comes_from_public_url_never_from_host(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}",
                 public_url="https://grader.example.edu") as client:
        token = add_students(client, "ada")["ada"]
        r = client.post("/api/submissions", headers={**auth(token), "Host": "evil.example"},
                        data={"exercise": "safe_softmax"},
                        files={"file": ("k.py", "# fake: passed 100\n", "text/x-python")})
        assert r.json()["url"] == f"https://grader.example.edu/api/submissions/{r.json()['id']}"
    with running(f"sqlite:///{tmp_path / 'db2.sqlite'}") as client:  # no PUBLIC_URL: a path
        token = add_students(client, "ada")["ada"]
        r = client.post("/api/submissions", headers={**auth(token), "Host": "evil.example"},
                        data={"exercise": "safe_softmax"},
                        files={"file": ("k.py", "# fake: passed 100\n", "text/x-python")})
        assert r.json()["url"] == f"/api/submissions/{r.json()['id']}"


@pytest.mark.parametrize("setting, value, why", [
    ("admin_token", "admintok", "it has 8 characters, fewer than 16"),
    ("admin_token", " " * 16, "starts or ends with white space"),  # issue 26, item 8
    ("admin_token", "a" * 24, "about 0 bits"),
    ("admin_token", "change-me-instructor-token", "placeholder"),  # docker/.env.example's
    ("course_secret", "abababababababab", "about 16 bits"),
    ("metrics_token", "1111111111111112", "about 5 bits"),
    ("task_secret", "x", "it has 1 character, fewer than 16"),
])
def test_a_weak_token_or_secret_is_refused_saying_why(setting, value, why):
    with pytest.raises(ValidationError, match=why) as refused:
        settings_for("sqlite://", **{setting: value})
    assert f"{setting.upper()} is too weak" in str(refused.value)
    assert "secrets.token_urlsafe(32)" in str(refused.value)  # how to make a good one


def test_random_tokens_and_the_tests_own_are_strong_enough():
    # secrets.token_hex(8) draws; a draw under 32 bits needs 4 distinct digits or fewer
    # (about 4 in 10 million): 10 distinct, as these, is typical
    for token in ("178160d588be8e5a", "1b752e1bc69fc52e", "1GStSWy6VSpzwM0upOgtdw"):
        settings_for("sqlite://", admin_token=token, task_secret=token, metrics_token=token)
    settings_for("sqlite://", admin_token="web-admin-token-0123",
                 course_secret="test-course-secret-0123456789")


def test_the_sqlite_file_is_private(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}"):
        pass
    mode = stat.S_IMODE(os.stat(tmp_path / "db.sqlite").st_mode)
    assert mode == 0o600, oct(mode)


def test_a_roster_naming_a_username_twice_is_refused(client):
    body = {"students": [{"username": "ada", "display_name": "A"},
                         {"username": "ada", "display_name": "B"}]}
    r = client.post("/api/admin/students", json=body, headers=auth(ADMIN))
    assert r.status_code == 422 and "ada" in r.json()["detail"]
    r = client.post("/api/admin/students", headers=auth(ADMIN),
                    files={"file": ("r.csv", "username,display_name\nbob,B\nbob,C\n", "text/csv")})
    assert r.status_code == 422 and "bob" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/api/submissions", "/signin", "/api/admin/students"])
def test_an_oversized_body_is_refused_before_it_is_read(client, path):
    big = b"x" * (50 << 20)
    r = client.post(path, content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "detail" in r.json()


def test_the_leaderboard_reads_no_source_and_is_served_from_cache_until_a_change(client):
    from sqlalchemy import event

    from test_boards import settle

    tokens = add_students(client, "ada", "bob")
    for name in tokens:
        assert submit(client, tokens[name]).status_code == 202
    for _ in range(400):  # the fake grader grades at once, but on a busy machine not at once
        if len(client.get("/api/leaderboard/safe_softmax").json()["entries"]) == 2:
            break
        time.sleep(0.05)
    settle(client)
    engine = client.app.state.sessionmaker.kw["bind"]
    statements = []
    listener = lambda conn, cursor, sql, *rest: statements.append(sql)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        client.post("/api/admin/students", json={"students": [
            {"username": "cy", "display_name": "Cy"}]}, headers=auth(ADMIN))  # on no board
        statements.clear()
        unchanged = client.get("/api/leaderboard/safe_softmax").json()
        after_cy = list(statements)
        client.post("/api/admin/students", json={"students": [
            {"username": "bob", "display_name": "Robert"}]}, headers=auth(ADMIN))  # a change
        statements.clear()
        first = client.get("/api/leaderboard/safe_softmax").json()
        read = list(statements)
        statements.clear()
        again = client.get("/api/leaderboard/safe_softmax").json()
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert [e["display_name"] for e in unchanged["entries"]] == ["Ada", "Bob"]
    assert not any("submissions" in sql for sql in after_cy)  # a new student changes no board
    assert [e["display_name"] for e in first["entries"]] == ["Ada", "Robert"] and again == first
    assert read and not any("source" in sql for sql in read)
    assert not any("submissions" in sql for sql in statements)  # the second: from the cache


def test_exercises_are_listed_in_the_courses_order(client):
    """Issue 14: listed alphabetically, exercise 1 (safe softmax) came last."""
    names = [e["name"] for e in client.get("/api/exercises").json()["exercises"]]
    assert names == ["safe_softmax", "masked_softmax", "online_softmax", "log_softmax_xent",
                     "causal_block_skip"]
    page = client.get("/exercises").text
    assert page.index("Safe softmax") < page.index("Masked softmax") < page.index("Online softmax")


def test_the_server_says_ready_only_once_every_slots_runners_are_warm(tmp_path, monkeypatch):
    """/api/health answers at once (liveness); /api/ready says 503 until every slot's worker
    has answered its warm-up, so that a first grading is not sent to runners still starting
    (issue 43: the first grading after start within 2x a warm one)."""
    import threading

    from server.grading.graders_client import GradersClient

    warmed = threading.Event()
    monkeypatch.setattr(GradersClient, "warm_up", lambda self, *a, **k: warmed.wait(60))
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        health = client.get("/api/health")
        assert health.status_code == 200 and health.json()["ok"] is True
        assert health.json()["ready"] is False
        waiting = client.get("/api/ready")
        assert waiting.status_code == 503 and waiting.headers["Retry-After"] == "2"
        assert waiting.json()["slots_warm"] == 0 < waiting.json()["slots"]
        warmed.set()
        for _ in range(100):
            ready = client.get("/api/ready")
            if ready.status_code == 200:
                break
            time.sleep(0.05)
        assert ready.status_code == 200
        assert ready.json()["ready"] is True
        assert ready.json()["slots_warm"] == ready.json()["slots"]
