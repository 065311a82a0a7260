"""The submission page's progress as a stream (issue 27): one event per change, the last
with the result, and only for the submission's owner (or an instructor)."""

from __future__ import annotations

import json
import threading
import time

from server.domain.models import Status, Submission
from server.domain.progress import record_check
from services import until
from test_server_api import ADMIN, NoDispatch, add_students, auth, running, submit


def _events(client, sid, token, seen: list, done: threading.Event) -> None:
    with client.stream("GET", f"/api/submissions/{sid}/events", headers=auth(token)) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[len("data: "):]))
    done.set()


def test_each_change_is_one_event_and_the_last_has_the_result(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob")
        sid = submit(client, tokens["ada"]).json()["id"]
        seen, done = [], threading.Event()
        reader = threading.Thread(target=_events, args=(client, sid, tokens["ada"], seen, done),
                                  daemon=True)
        reader.start()
        assert until(lambda: len(seen) == 1)
        assert seen[0]["status"] == "queued" and seen[0]["progress"]["queue_position"] == 1
        time.sleep(2.5)  # nothing changed: no event (the page counts the seconds)
        assert len(seen) == 1
        sessions = client.app.state.sessionmaker
        with sessions.begin() as db:
            s = db.get(Submission, sid)
            s.status, s.attempts = Status.RUNNING, 1
        assert until(lambda: len(seen) == 2) and seen[1]["status"] == "running"
        record_check(sessions, sid, 1, {"name": "random_rows", "passed": True, "points": 15,
                                        "max_points": 15})
        assert until(lambda: len(seen) == 3)
        assert [c["name"] for c in seen[2]["progress"]["checks"]] == ["random_rows"]
        with sessions.begin() as db:
            s = db.get(Submission, sid)
            s.status, s.verdict, s.score = Status.GRADED, "passed", 100.0
        assert done.wait(20)  # the stream ends with the verdict
        assert seen[-1]["status"] == "graded" and seen[-1]["score"] == 100.0
        assert "result" in seen[-1]


def test_only_its_owner_or_an_instructor_may_follow_it(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob")
        sid = submit(client, tokens["ada"]).json()["id"]
        assert client.get(f"/api/submissions/{sid}/events",
                          headers=auth(tokens["bob"])).status_code == 404
        assert client.get(f"/api/submissions/{sid}/events").status_code == 401
        with client.app.state.sessionmaker.begin() as db:
            db.get(Submission, sid).status = Status.ERROR
        with client.stream("GET", f"/api/submissions/{sid}/events", headers=auth(ADMIN)) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert len(lines) == 1 and json.loads(lines[0][6:])["status"] == "error"
