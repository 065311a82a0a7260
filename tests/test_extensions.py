"""Extensions (issue 15, item 6): one student's later deadline for one exercise moves their
late marks, and nobody else's, on submission, in the API, on the pages, the board and the
CSV; granting or removing one re-marks the work already in."""

import re

import pytest

from test_server_api import ADMIN, NoDispatch, _graded, add_students, auth, grades_csv, running, \
    submit, wait_done
from test_web_pages import sign_in

PAST = {"safe_softmax": "2020-01-01T00:00:00+00:00"}  # the course deadline: long gone
LATER = "2099-06-30T12:00:00+00:00"


def grades(client) -> dict[tuple[str, str], dict]:
    return {(r["username"], r["exercise"]): r for r in grades_csv(client)}


def grant(client, username="ada", exercise="safe_softmax", deadline=LATER, **more):
    return client.post("/api/admin/extensions", headers=auth(ADMIN),
                       json={"username": username, "exercise": exercise, "deadline": deadline,
                             **more})


def test_an_extension_moves_one_students_deadline_and_nobody_elses(database_url):
    with running(database_url, deadlines=PAST) as client:
        tokens = add_students(client, "ada", "bob")
        r = grant(client, note="flu, doctor's note")
        assert r.status_code == 200, r.text
        assert r.json()["deadline"] == LATER and r.json()["granted_by"] == "instructor"
        assert r.json()["course_deadline"] == PAST["safe_softmax"]

        # bob scores higher, but after the course deadline; ada is on time by her extension
        ada = submit(client, tokens["ada"], "# fake: passed 60\n").json()
        bob = submit(client, tokens["bob"], "# fake: passed 100\n").json()
        assert (ada["late"], bob["late"]) == (False, True)
        wait_done(client, tokens["ada"], ada["id"])
        wait_done(client, tokens["bob"], bob["id"])

        # under the default LATE_POLICY (on_time_first) on-time work ranks first
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [(e["display_name"], e["late"]) for e in board] == [("Ada", False), ("Bob", True)]

        def view(token=None):
            return client.get("/api/exercises/safe_softmax",
                              headers=auth(token) if token else {}).json()

        assert (view(tokens["ada"])["deadline"], view(tokens["ada"])["extended"]) == (LATER, True)
        assert view(tokens["ada"])["course_deadline"] == PAST["safe_softmax"]
        for other in (tokens["bob"], None):
            assert (view(other)["deadline"], view(other)["extended"]) == (PAST["safe_softmax"],
                                                                          False)
        listed = client.get("/api/exercises", headers=auth(tokens["ada"])).json()["exercises"]
        assert {e["name"]: e["deadline"] for e in listed}["safe_softmax"] == LATER

        rows = grades(client)
        assert [rows[("ada", "safe_softmax")][k] for k in ("deadline", "extension", "late")] == \
            [LATER, "yes", "no"]
        assert [rows[("bob", "safe_softmax")][k] for k in ("deadline", "extension", "late")] == \
            [PAST["safe_softmax"], "no", "yes"]
        # an exercise with no deadline has none for anyone
        assert rows[("ada", "masked_softmax")]["deadline"] == ""

        listed = client.get("/api/admin/extensions", headers=auth(ADMIN)).json()["extensions"]
        assert [(e["username"], e["exercise"], e["note"]) for e in listed] == [
            ("ada", "safe_softmax", "flu, doctor's note")]


def test_granting_re_marks_work_already_in_and_removing_restores_it(database_url):
    """Documented choice: an extension granted after the fact re-marks that student's
    submissions to that exercise, so the board and the CSV agree with their deadline."""
    with running(database_url, dispatcher=NoDispatch(), deadlines=PAST) as client:
        add_students(client, "ada", "bob")
        with client.app.state.sessionmaker.begin() as db:  # both handed in after the deadline
            _graded(db, "ada", 60.0, late=True)
            _graded(db, "bob", 100.0, late=True)
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [e["display_name"] for e in board] == ["Bob", "Ada"]  # both late: by score

        r = grant(client, deadline="2099-01-01T00:00:00Z")
        assert r.json()["remarked"] == 1
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [(e["display_name"], e["late"]) for e in board] == [("Ada", False), ("Bob", True)]
        assert grades(client)[("ada", "safe_softmax")]["late"] == "no"
        assert grades(client)[("bob", "safe_softmax")]["late"] == "yes"

        # granting again replaces: one extension, the newer deadline
        assert grant(client, deadline=LATER).json()["remarked"] == 0
        listed = client.get("/api/admin/extensions", headers=auth(ADMIN)).json()["extensions"]
        assert [(e["username"], e["deadline"]) for e in listed] == [("ada", LATER)]

        r = client.delete("/api/admin/extensions/ada/safe_softmax", headers=auth(ADMIN))
        assert r.status_code == 200 and r.json()["remarked"] == 1
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [(e["display_name"], e["late"]) for e in board] == [("Bob", True), ("Ada", True)]
        assert grades(client)[("ada", "safe_softmax")]["extension"] == "no"
        assert client.get("/api/admin/extensions", headers=auth(ADMIN)).json() == {
            "extensions": []}


@pytest.mark.parametrize("body, status, words", [
    ({"username": "zed"}, 404, "no student 'zed'"),
    ({"username": "instructor"}, 404, "no student 'instructor'"),
    ({"exercise": "nope"}, 404, "unknown exercise 'nope'"),
    ({"deadline": "next tuesday"}, 422, "not an ISO 8601 time"),
    ({"deadline": "2099-13-45T00:00:00Z"}, 422, "not an ISO 8601 time"),
    ({"deadline": "2099-01-01T00:00:00"}, 422, "has no timezone"),
    ({"deadline": "2019-01-01T00:00:00Z"}, 422, "later than the course deadline"),
    ({"exercise": "masked_softmax"}, 422, "masked_softmax has no deadline"),
    ({"deadline": 20990101}, 422, "bad extension"),
    ({"note": "x" * 201}, 422, "bad extension"),
    ({"note": "a\x00b"}, 422, "NUL"),
    ({"username": "a\x00b"}, 422, "NUL"),  # refused before any lookup, as every JSON string
])
def test_bad_extensions_are_refused_with_a_reason(database_url, body, status, words):
    with running(database_url, dispatcher=NoDispatch(), deadlines=PAST) as client:
        add_students(client, "ada")
        fields = {"username": "ada", "exercise": "safe_softmax", "deadline": LATER} | body
        r = client.post("/api/admin/extensions", headers=auth(ADMIN), json=fields)
        assert r.status_code == status and words in str(r.json()["detail"]), r.text
        assert client.get("/api/admin/extensions", headers=auth(ADMIN)).json() == {
            "extensions": []}


def test_only_instructors_grant_and_removing_nothing_says_so(database_url):
    with running(database_url, dispatcher=NoDispatch(), deadlines=PAST) as client:
        token = add_students(client, "ada")["ada"]
        r = client.post("/api/admin/extensions", headers=auth(token),
                        json={"username": "ada", "exercise": "safe_softmax", "deadline": LATER})
        assert r.status_code == 403
        assert client.post("/api/admin/extensions", headers=auth(ADMIN),
                           content=b"{not json").status_code == 422
        r = client.delete("/api/admin/extensions/ada/safe_softmax", headers=auth(ADMIN))
        assert r.status_code == 404 and "ada has no extension for safe_softmax" in r.text
        r = client.delete("/api/admin/extensions/zed/safe_softmax", headers=auth(ADMIN))
        assert r.status_code == 404 and "no student 'zed'" in r.text
        r = client.delete("/api/admin/extensions/ada/nope", headers=auth(ADMIN))
        assert r.status_code == 404 and "unknown exercise 'nope'" in r.text
        r = client.delete("/api/admin/extensions/a%00b/safe_softmax", headers=auth(ADMIN))
        assert r.status_code == 404 and "no student" in r.text


def test_the_instructor_page_grants_lists_and_removes_an_extension(tmp_path):
    from server.auth.csrf import FIELD

    with running(f"sqlite:///{tmp_path / 'db'}", deadlines=PAST) as client:
        tokens = add_students(client, "ada", "bob")
        sid = submit(client, tokens["ada"]).json()["id"]
        wait_done(client, tokens["ada"], sid)
        sign_in(client, ADMIN)
        page = client.get("/admin").text
        assert "No extensions granted." in page
        token = re.search(rf'name="{FIELD}" value="([^"]+)"', page).group(1)
        form = {"username": "ada", "exercise": "safe_softmax", "deadline": "2099-06-30T12:00",
                "note": "flu"}

        assert client.post("/admin/extensions", data=form).status_code == 403  # no CSRF token
        bad = client.post("/admin/extensions", data=form | {FIELD: token, "deadline": "soon"})
        assert bad.status_code == 422 and "No extension granted: the deadline" in bad.text
        bad = client.post("/admin/extensions", data=form | {FIELD: token, "username": "zed"})
        assert bad.status_code == 404 and "no student" in bad.text

        r = client.post("/admin/extensions", data=form | {FIELD: token}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/admin?")
        done = client.get(r.headers["location"]).text
        assert "Extension granted to ada for safe_softmax; 1 of their submissions re-marked." \
            in done
        start = done.index('<table id="extensions"')
        table = done[start:done.index("</table>", start)]
        assert "Ada (ada)" in table and "2099-06-30 12:00:00 UTC" in table and "flu" in table
        assert "Bob (bob)" not in table

        # the page's field is read as UTC; ada's submission now reads on time with its deadline
        assert "late</strong>" not in client.get(f"/submissions/{sid}").text
        sign_in(client, tokens["ada"])
        mine = client.get(f"/submissions/{sid}").text
        assert "2099-06-30 12:00:00 UTC</time> (an extension)" in mine
        assert "Your deadline (an extension)" in client.get("/exercises/safe_softmax").text
        sign_in(client, tokens["bob"])
        theirs = client.get("/exercises/safe_softmax").text
        assert "Your deadline" not in theirs and "2020-01-01 00:00:00 UTC" in theirs

        sign_in(client, ADMIN)  # a new session: its forms carry a new token
        token = re.search(rf'name="{FIELD}" value="([^"]+)"', client.get("/admin").text).group(1)
        removed = client.post("/admin/extensions/remove",
                              data={FIELD: token, "username": "ada", "exercise": "safe_softmax"})
        assert removed.status_code == 200
        assert "Extension of ada for safe_softmax removed; 1 of their submissions re-marked" \
            in removed.text
        assert "No extensions granted." in removed.text
        assert "late</strong>" in client.get(f"/submissions/{sid}").text
