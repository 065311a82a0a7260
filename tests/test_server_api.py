"""The HTTP API on SQLite and on PostgreSQL: submit, grade, rank; privacy, validation, limits."""

import csv
import io
import sys
import time
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from conftest import REPO, mutant_file
from server.app import create_app
from server.core.settings import Settings
from server.domain.models import GradeRun, Submission

ADMIN = "instructor-token"
PASS = "# fake: passed 100\nprint('hi')\n"


def settings_for(database_url: str, **overrides) -> Settings:
    values = dict(database_url=database_url, admin_token=ADMIN, grader_device="cpu",
                  grader_command=f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}")
    return Settings(**(values | overrides))


class NoDispatch:
    """Leaves every submission queued (for the queue-depth test)."""

    def start(self):
        pass

    def stop(self):
        pass

    def notify(self):
        pass


@contextmanager
def running(database_url, dispatcher=None, **overrides):
    app = create_app(settings_for(database_url, **overrides), dispatcher=dispatcher)
    with TestClient(app) as client:
        yield client


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def add_students(client, *names):
    body = {"students": [{"username": n, "display_name": n.title()} for n in names]}
    r = client.post("/api/admin/students", json=body, headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    return {s["username"]: s["token"] for s in r.json()["students"]}


def submit(client, token, source=PASS, exercise="safe_softmax", filename="k.py"):
    return client.post("/api/submissions", headers=auth(token), data={"exercise": exercise},
                       files={"file": (filename, source.encode() if isinstance(source, str)
                                       else source)})


def grades_csv(client) -> list[dict[str, str]]:
    """The grades CSV's rows; it opens with a UTF-8 byte-order mark (for Excel)."""
    raw = client.get("/api/admin/export.csv", headers=auth(ADMIN)).content
    assert raw.startswith(b"\xef\xbb\xbf"), raw[:20]
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))


def wait_done(client, token, sid, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/submissions/{sid}", headers=auth(token)).json()
        if body["status"] in ("graded", "error") and not body.get("regrading"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"submission {sid} still {body['status']}")


def test_submit_poll_and_leaderboard(database_url):
    with running(database_url) as client:
        tokens = add_students(client, "ada", "bob")
        r = submit(client, tokens["ada"])
        assert r.status_code == 202
        body = r.json()
        assert body["status"] == "queued" and body["url"].endswith(f"/api/submissions/{body['id']}")
        # committed before the 202: the row is there
        with client.app.state.sessionmaker() as db:
            assert db.get(Submission, body["id"]) is not None
        done = wait_done(client, tokens["ada"], body["id"])
        assert done["status"] == "graded" and done["result"]["verdict"] == "passed"
        assert done["exercise"] == "safe_softmax" and done["language"] == "triton"

        r = client.post("/api/submissions", headers=auth(tokens["bob"]),
                        json={"exercise": "safe_softmax", "language": "triton",
                              "source": "# fake: failed 40\n"})
        assert r.status_code == 202
        wait_done(client, tokens["bob"], r.json()["id"])
        board = client.get("/api/leaderboard/safe_softmax").json()
        assert [(e["rank"], e["display_name"], e["score"]) for e in board["entries"]] == [
            (1, "Ada", 100.0), (2, "Bob", 40.0)]
        assert set(board["entries"][0]) == {"rank", "display_name", "score", "fraction_of_copy",
                                            "gbs", "device", "late", "submitted_at"}
        assert "print('hi')" not in str(board)


def test_best_per_student_ties_go_to_the_earlier(database_url):
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        ids = []
        for source in ("# fake: passed 100\n# first\n", "# fake: failed 50\n",
                       "# fake: passed 100\n# second\n"):
            sid = submit(client, token, source).json()["id"]
            wait_done(client, token, sid)
            ids.append(sid)
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert len(board) == 1 and board[0]["score"] == 100.0
        first = client.get(f"/api/submissions/{ids[0]}", headers=auth(token)).json()
        assert board[0]["submitted_at"] == first["created_at"]


def test_privacy(database_url):
    with running(database_url) as client:
        tokens = add_students(client, "ada", "eve")
        sid = submit(client, tokens["ada"]).json()["id"]
        wait_done(client, tokens["ada"], sid)
        assert client.get(f"/api/submissions/{sid}", headers=auth(tokens["eve"])).status_code == 404
        assert client.get("/api/submissions", headers=auth(tokens["eve"])).json() == {"submissions": []}
        assert len(client.get("/api/submissions", headers=auth(tokens["ada"])).json()["submissions"]) == 1
        assert client.get(f"/api/admin/submissions/{sid}/source",
                          headers=auth(tokens["eve"])).status_code == 403
        assert client.get("/api/admin/submissions", headers=auth(tokens["ada"])).status_code == 403
        assert client.get("/api/submissions", headers=auth("wrong")).status_code == 401
        assert client.get("/api/submissions").status_code == 401
        # the instructor sees everything
        assert client.get(f"/api/submissions/{sid}", headers=auth(ADMIN)).status_code == 200
        assert client.get(f"/api/admin/submissions/{sid}/source", headers=auth(ADMIN)).text == PASS


@pytest.mark.parametrize("case, status, words", [
    ({"exercise": "nope"}, 422, "unknown exercise"),
    ({"filename": "k.cu"}, 422, "cannot tell the language"),
    ({"source": "x" * (64 * 1024 + 1)}, 413, "limit is 65536"),
    ({"source": b"\xff\xfe bad"}, 422, "not UTF-8"),
    ({"source": "   "}, 422, "empty"),
])
def test_validation(database_url, case, status, words):
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        r = submit(client, token, source=case.get("source", PASS),
                   exercise=case.get("exercise", "safe_softmax"),
                   filename=case.get("filename", "k.py"))
        assert r.status_code == status and words in r.json()["detail"], r.text


def test_hip_files_are_taken_and_unknown_languages_refused(database_url):
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        r = submit(client, token, source="// fake: passed 100\n", filename="k.hip")
        assert r.status_code == 202
        body = client.get(f"/api/submissions/{r.json()['id']}", headers=auth(token)).json()
        assert body["language"] == "hip"
        r = client.post("/api/submissions", headers=auth(token),
                        json={"exercise": "safe_softmax", "language": "cuda", "source": "x"})
        assert r.status_code == 422 and "accepts triton, hip, not 'cuda'" in r.json()["detail"]


def test_json_needs_its_fields_and_content_type(database_url):
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        r = client.post("/api/submissions", headers=auth(token), json={"exercise": "safe_softmax"})
        assert r.status_code == 422 and "source" in r.json()["detail"]
        r = client.post("/api/submissions", headers={**auth(token), "content-type": "text/plain"},
                        content=b"x")
        assert r.status_code == 415


def test_one_in_flight_and_hourly_limit(database_url):
    with running(database_url, submissions_per_hour=2) as client:
        token = add_students(client, "ada")["ada"]
        first = submit(client, token, "# fake: sleep 2 passed 100\n")
        assert first.status_code == 202
        busy = submit(client, token)
        assert busy.status_code == 429 and int(busy.headers["Retry-After"]) >= 1
        wait_done(client, token, first.json()["id"])
        wait_done(client, token, submit(client, token).json()["id"])
        third = submit(client, token)
        assert third.status_code == 429 and "an hour" in third.json()["detail"]
        assert 3000 <= int(third.headers["Retry-After"]) <= 3600


def test_queue_depth_cap(database_url):
    with running(database_url, dispatcher=NoDispatch(), max_queue_depth=1) as client:
        tokens = add_students(client, "ada", "bob")
        assert submit(client, tokens["ada"]).status_code == 202
        full = submit(client, tokens["bob"])
        assert full.status_code == 503 and "Retry-After" in full.headers


def test_late_submissions_are_graded_and_marked(database_url):
    with running(database_url, deadlines={"safe_softmax": "2020-01-01T00:00:00+00:00"}) as client:
        token = add_students(client, "ada")["ada"]
        r = submit(client, token)
        assert r.json()["late"] is True
        done = wait_done(client, token, r.json()["id"])
        assert done["status"] == "graded" and done["late"] is True
        assert client.get("/api/leaderboard/safe_softmax").json()["entries"][0]["late"] is True
        listed = client.get("/api/exercises").json()["exercises"]
        assert next(e for e in listed if e["name"] == "safe_softmax")["deadline"].startswith("2020")


def test_grader_errors_are_retried_then_stored_as_error(database_url, tmp_path, monkeypatch):
    log = tmp_path / "grader.log"
    monkeypatch.setenv("FAKE_GRADER_LOG", str(log))
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        done = wait_done(client, token, submit(client, token, "# fake: grader_error\n").json()["id"])
        assert done["status"] == "error" and done["attempts"] == 3
        assert len(log.read_text().splitlines()) == 3
        assert client.get("/api/leaderboard/safe_softmax").json()["entries"] == []
        # an error does not hold the student back
        assert submit(client, token).status_code == 202


def test_exercises_endpoint(database_url):
    with running(database_url) as client:
        names = [e["name"] for e in client.get("/api/exercises").json()["exercises"]]
        # the course's order
        assert names[:3] == ["safe_softmax", "masked_softmax", "online_softmax"]
        assert names[-1] == "causal_block_skip"  # the module's last stretch exercise (order 5)
        assert names[3] == "log_softmax_xent"  # the first stretch exercise (order 4)
        one = client.get("/api/exercises/online_softmax").json()
        assert "ANSWERS" in one["skeletons"]["triton"]["source"] and one["statement"]
        assert client.get("/api/exercises/nope").status_code == 404
        assert "/api/submissions" in client.get("/openapi.json").json()["paths"]


def test_a_grading_that_flags_itself_is_flagged_for_instructors(database_url):
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        sid = submit(client, token, "# fake: rejected\n").json()["id"]
        assert wait_done(client, token, sid)["result"]["verdict"] == "rejected"
        listed = client.get("/api/admin/submissions?exercise=safe_softmax",
                            headers=auth(ADMIN)).json()["submissions"]
        assert [(s["id"], s["flag"]) for s in listed] == [(sid, "suspicious")]
        assert client.get("/api/leaderboard/safe_softmax").json()["entries"] == []


def test_instructor_roster_regrade_flag_and_export(database_url):
    with running(database_url) as client:
        roster = "username,display_name\nada,Ada L.\nbob,Bob K.\n"
        r = client.post("/api/admin/students", headers=auth(ADMIN),
                        files={"file": ("roster.csv", roster.encode())})
        assert r.status_code == 200
        tokens = {s["username"]: s["token"] for s in r.json()["students"]}
        with client.app.state.sessionmaker() as db:  # tokens are stored hashed
            from server.domain.models import User
            stored = {u.token_hash for u in db.scalars(select(User))}
        assert not set(tokens.values()) & stored
        a = submit(client, tokens["ada"]).json()["id"]
        b = submit(client, tokens["bob"], "# fake: failed 30\n").json()["id"]
        wait_done(client, tokens["ada"], a)
        wait_done(client, tokens["bob"], b)

        listed = client.get("/api/admin/submissions?exercise=safe_softmax&verdict=failed",
                            headers=auth(ADMIN)).json()["submissions"]
        assert [s["id"] for s in listed] == [b] and listed[0]["username"] == "bob"

        r = client.post("/api/admin/regrade", headers=auth(ADMIN), json={"submission_id": a})
        assert r.json() == {"queued": 1}
        wait_done(client, tokens["ada"], a)
        with client.app.state.sessionmaker() as db:
            assert db.scalar(select(func.count()).where(GradeRun.submission_id == a)) == 2
        assert client.post("/api/admin/regrade", headers=auth(ADMIN),
                           json={"exercise": "safe_softmax"}).json()["queued"] == 2

        wait_done(client, tokens["ada"], a)
        wait_done(client, tokens["bob"], b)
        r = client.post(f"/api/admin/submissions/{a}/flag", headers=auth(ADMIN),
                        json={"flag": "invalidated"})
        assert r.status_code == 200 and r.json()["flag"] == "invalidated"
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [e["display_name"] for e in board] == ["Bob K."]

        export = client.get("/api/admin/export.csv", headers=auth(ADMIN))
        assert export.headers["content-type"].startswith("text/csv")
        rows = grades_csv(client)
        # every student and exercise (issue 14): ada's only graded work is flagged, and
        # the CSV says so instead of dropping her
        safe = [(r["username"], r["best_score"], r["late"], r["flagged"]) for r in rows
                if r["exercise"] == "safe_softmax"]
        assert safe == [("ada", "", "", f"{a}:invalidated"), ("bob", "30.0", "no", "")]
        assert {r["exercise"] for r in rows} == set(client.app.state.exercises)
        assert len(rows) == 2 * len(client.app.state.exercises)

        # a lost token: the roster again issues a new one, the old one stops working
        again = add_students(client, "ada")["ada"]
        assert client.get("/api/submissions", headers=auth(tokens["ada"])).status_code == 401
        assert client.get("/api/submissions", headers=auth(again)).status_code == 200


def test_real_grader_end_to_end(tmp_path):
    """The server through the real graders CLI, in its sandbox, on the CPU interpreter."""
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", grader_command="") as client:
        tokens = add_students(client, "ada", "bob")
        ref = (REPO / "reference_solutions" / "safe_softmax" / "solution.py").read_text()
        naive = mutant_file("safe_softmax", "naive_unsafe_exp").read_text()
        a = submit(client, tokens["ada"], ref).json()["id"]
        b = submit(client, tokens["bob"], naive).json()["id"]
        good = wait_done(client, tokens["ada"], a, timeout=120)
        bad = wait_done(client, tokens["bob"], b, timeout=120)
        assert good["result"]["verdict"] == "passed" and good["score"] == 100
        assert good["result"]["sandboxed"] is True
        failed = {c["name"]: c for c in bad["result"]["checks"] if not c["passed"]}
        assert "poisoned_row" in failed and "subtract the row max" in failed["poisoned_row"]["message"]
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [e["display_name"] for e in board] == ["Ada", "Bob"]


def _graded(db, username: str, score: float, exercise: str = "safe_softmax",
            result: dict | None = None, **fields) -> int:
    """A graded submission of ``username``, straight into the database: ``result`` is the
    grader's JSON (a plain pass by default); ``fields`` set the submission's own columns."""
    from server.domain.models import Status, User

    result = result or {"verdict": "passed", "score": score}
    user = db.scalar(select(User).where(User.username == username))
    s = Submission(**{"user_id": user.id, "exercise": exercise, "language": "triton",
                      "filename": "k.py", "source": PASS, "status": Status.GRADED,
                      "attempts": 1, "late": False, "verdict": result["verdict"],
                      "score": score, **fields})
    db.add(s)
    db.flush()
    db.add(GradeRun(submission_id=s.id, verdict=result["verdict"], score=score, result=result,
                    grader_version="test"))
    return s.id


def test_regrade_all_keeps_the_board_and_the_csv_and_leaves_students_room(database_url):
    """Issue 12: "regrade all" emptied the leaderboard and the CSV while it ran, and its
    queued regrades filled the queue cap so that every student got 503."""
    with running(database_url, dispatcher=NoDispatch(), max_queue_depth=2) as client:
        tokens = add_students(client, "ada", "bob", "cy", "dan")
        with client.app.state.sessionmaker.begin() as db:
            for name, score in (("ada", 90.0), ("bob", 80.0), ("cy", 70.0)):
                _graded(db, name, score)
        r = client.post("/api/admin/regrade", headers=auth(ADMIN),
                        json={"exercise": "safe_softmax"})
        assert r.json() == {"queued": 3}
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [(e["display_name"], e["score"]) for e in board] == [
            ("Ada", 90.0), ("Bob", 80.0), ("Cy", 70.0)]
        rows = grades_csv(client)
        graded = [(r["username"], r["best_score"]) for r in rows
                  if r["exercise"] == "safe_softmax"]
        assert graded == [("ada", "90.0"), ("bob", "80.0"), ("cy", "70.0"), ("dan", "")]
        assert submit(client, tokens["dan"]).status_code == 202  # the cap counts no regrade
        assert submit(client, tokens["ada"]).status_code == 202  # nor a student's in flight


def test_regrades_and_new_work_take_turns(database_url):
    from server.grading.local_pool import LocalPool, SlotSpec

    with running(database_url, dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob", "cy", "dan")
        with client.app.state.sessionmaker.begin() as db:
            old = [_graded(db, name, 50.0) for name in ("ada", "bob")]
        client.post("/api/admin/regrade", headers=auth(ADMIN), json={"exercise": "safe_softmax"})
        new = [submit(client, tokens[n]).json()["id"] for n in ("cy", "dan")]
        pool = LocalPool(client.app.state.sessionmaker, None, client.app.state.settings,
                         slots=[SlotSpec("t", "cpu", None)])
        order = [pool.claimer.claim().id for _ in range(4)]
        assert order == [new[0], old[0], new[1], old[1]]
        assert pool.claimer.claim() is None
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert len(board) == 2  # the regrades being graded keep their grades on the board


@pytest.mark.parametrize("policy, board, csv_scores", [
    # ada: on time 70, late 100; bob: only late 90; cy: on time 80
    ("on_time_first", [("Cy", 80.0), ("Ada", 70.0), ("Bob", 90.0)],  # on-time work first
     {"ada": "70.0", "bob": "90.0", "cy": "80.0"}),
    ("best_counts", [("Ada", 100.0), ("Bob", 90.0), ("Cy", 80.0)],
     {"ada": "100.0", "bob": "90.0", "cy": "80.0"}),
    ("on_time_only", [("Cy", 80.0), ("Ada", 70.0)], {"ada": "70.0", "bob": "", "cy": "80.0"}),
])
def test_the_late_policy_decides_the_board_and_the_csv_alike(tmp_path, policy, board,
                                                               csv_scores):
    """Issue 14, item 5: a late 100 beat an on-time 70. LATE_POLICY now decides, the same
    way on the leaderboard, in its API and in the grades CSV."""
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch(),
                 late_policy=policy) as client:
        add_students(client, "ada", "bob", "cy")
        with client.app.state.sessionmaker.begin() as db:
            for name, score, late in (("ada", 70.0, False), ("ada", 100.0, True),
                                      ("bob", 90.0, True), ("cy", 80.0, False)):
                _graded(db, name, score, late=late)
        answer = client.get("/api/leaderboard/safe_softmax").json()
        got = [(e["display_name"], e["score"]) for e in answer["entries"]]
        assert got == board
        assert answer["late_policy"] == policy
        rows = grades_csv(client)
        scores = {r["username"]: r["best_score"] for r in rows if r["exercise"] == "safe_softmax"}
        assert scores == csv_scores
        assert {r["late_policy"] for r in rows} == {policy}
        page = client.get("/leaderboard/safe_softmax").text
        from server.domain.leaderboard import LATE_POLICIES
        assert LATE_POLICIES[policy] in page
