"""Leaderboards computed once per real change, by one request, served with an ETag
(server/domain/board_cache.py; issue 26, item 5)."""

import threading
import time

import pytest

from server.domain import board_cache as boards
from test_server_api import ADMIN, add_students, auth, running, submit, wait_done
from test_web_pages import sign_in

BOARD = "/api/leaderboard/safe_softmax"


def settle(client, exercise: str = "safe_softmax") -> None:
    """Until the board stops being cleared for 0.5 s, then read once (fresh). A grading's
    commit clears the board from its grading thread just after its result is visible."""
    settled, last = time.monotonic(), boards.version(exercise)
    deadline = settled + 30
    while time.monotonic() - settled < 0.5 and time.monotonic() < deadline:
        time.sleep(0.05)
        if boards.version(exercise) != last:
            settled, last = time.monotonic(), boards.version(exercise)
    client.get(f"/api/leaderboard/{exercise}")


@pytest.fixture
def graded(tmp_path):
    """A server with Ada and Bob graded on safe_softmax, and the board fresh."""
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        tokens = add_students(client, "ada", "bob")
        for name in ("ada", "bob"):
            wait_done(client, tokens[name], submit(client, tokens[name]).json()["id"])
        settle(client)
        yield client, tokens


def _fresh(client) -> bool:
    return boards.cached("safe_softmax", client.app.state.settings.late_policy) is not None


def test_an_unchanged_board_answers_304_to_its_etag_and_a_change_gives_a_new_one(graded):
    client, tokens = graded
    first = client.get(BOARD)
    etag = first.headers["etag"]
    assert first.status_code == 200 and first.headers["cache-control"] == "no-cache"
    again = client.get(BOARD, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    sid = client.get("/api/submissions", headers=auth(tokens["bob"])).json()["submissions"][0]["id"]
    r = client.post(f"/api/admin/submissions/{sid}/flag", json={"flag": "suspicious"},
                    headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    after = client.get(BOARD, headers={"If-None-Match": etag})
    assert after.status_code == 200 and after.headers["etag"] != etag
    assert [e["display_name"] for e in after.json()["entries"]] == ["Ada"]


def test_sign_ins_new_students_and_idle_polls_leave_the_board_fresh(graded):
    client, tokens = graded
    assert _fresh(client)
    before = boards.version("safe_softmax")
    sign_in(client, tokens["ada"])
    add_students(client, "cy")
    time.sleep(2.5)  # the grading slot polls the empty queue meanwhile (its claim commits)
    assert _fresh(client) and boards.version("safe_softmax") == before


def test_a_stored_result_clears_the_board(graded):
    client, tokens = graded
    before, other = boards.version("safe_softmax"), boards.version("masked_softmax")
    sid = submit(client, tokens["bob"], "# fake: failed 40\n").json()["id"]
    wait_done(client, tokens["bob"], sid)
    assert boards.version("safe_softmax") > before
    assert boards.version("masked_softmax") == other  # the other exercises' boards stay


def test_requests_that_find_the_board_stale_compute_it_once(graded, monkeypatch):
    client, _ = graded
    calls = []
    compute = boards.compute_leaderboard

    def slow_compute(db, exercise, policy):
        calls.append(exercise)
        time.sleep(0.3)  # long enough that every request below finds it being computed
        return compute(db, exercise, policy)

    monkeypatch.setattr(boards, "compute_leaderboard", slow_compute)
    boards.changed({"safe_softmax"})
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(client.get(BOARD)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["safe_softmax"]
    assert len(answers) == 8 and len({a.content for a in answers}) == 1


def test_the_page_marks_only_the_readers_own_row(graded):
    client, tokens = graded
    anonymous = client.get("/leaderboard/safe_softmax").text
    assert 'class="mine"' not in anonymous and anonymous.count("<tr ><td") == 2
    sign_in(client, tokens["bob"])
    page = client.get("/leaderboard/safe_softmax").text
    assert page.count('class="mine"') == 1
    mine = page[page.index('class="mine"'):]
    assert mine.index("Bob") < mine.index("</tr>")
