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


def test_open_streams_read_the_database_only_when_something_changes(tmp_path):
    """Issue 39: each stream read its submission once a second, so 100 open streams were
    100 reads a second. Now a stream reads when a change it shows is published: with
    four streams open and nothing changing, no statement touches the submissions in three
    seconds; one change is one read for its stream, whose page gets the event."""
    from sqlalchemy import event

    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob")
        sids = [submit(client, tokens[name], exercise=exercise).json()["id"]
                for name in ("ada", "bob") for exercise in ("safe_softmax", "masked_softmax")]
        readers, ended = [], []
        for sid in sids:
            seen, done = [], threading.Event()
            owner = tokens["ada"] if sid in sids[:2] else tokens["bob"]
            threading.Thread(target=_events, args=(client, sid, owner, seen, done),
                             daemon=True).start()
            readers.append(seen)
            ended.append(done)
        assert until(lambda: all(len(seen) == 1 for seen in readers))
        reads: list[str] = []
        engine = client.app.state.sessionmaker.kw["bind"]

        def count(conn, cursor, statement, *args):
            if "FROM submissions" in statement:
                reads.append(statement)
        event.listen(engine, "before_cursor_execute", count)
        try:
            time.sleep(3)
            assert reads == []  # four streams open, nothing changed: no reads
            sessions = client.app.state.sessionmaker
            with sessions.begin() as db:  # the last one starts running
                s = db.get(Submission, sids[-1])
                s.status, s.attempts = Status.RUNNING, 1
            assert until(lambda: len(readers[-1]) == 2)
            assert readers[-1][1]["status"] == "running"
            # the other three are queued ahead of it: none moved, and the queue did not move
            time.sleep(1.5)
            assert [len(seen) for seen in readers[:-1]] == [1, 1, 1]
        finally:
            event.remove(engine, "before_cursor_execute", count)
            with client.app.state.sessionmaker.begin() as db:  # every stream ends
                for sid in sids:
                    db.get(Submission, sid).status = Status.ERROR
            assert all(done.wait(20) for done in ended)
        looks = [r for r in reads if "WHERE submissions.id" in r]
        assert 1 <= len(looks) <= 6, reads  # its own read, and the others' in its bucket


def test_a_pool_with_no_connection_free_answers_503_with_retry_after(tmp_path):
    """Every connection in use past DB_POOL_TIMEOUT_S: 503 and when to try again, never a
    500 (issue 39: the starved pool answered 500 to 80 of 200 requests)."""
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch(),
                 db_pool_size=1, db_pool_timeout_s=0.5) as client:
        tokens = add_students(client, "ada")
        engine = client.app.state.sessionmaker.kw["bind"]
        held = [engine.connect() for _ in range(engine.pool.size() + 8)]  # its margin too
        try:
            r = client.get("/api/submissions", headers=auth(tokens["ada"]))
        finally:
            for connection in held:
                connection.close()
        assert r.status_code == 503 and r.headers["retry-after"] == "2", r.text
        assert "try again" in r.json()["detail"]
        assert client.get("/api/submissions", headers=auth(tokens["ada"])).status_code == 200
