"""Progress while waiting (issue 14, item 7): the slot's worker reports each check as it
ends, and the API tells a waiting student their place in the queue and the checks done."""

import json
import subprocess
import sys

from conftest import REPO
from server.domain.models import Status, Submission
from server.domain.progress import record_check
from test_server_api import NoDispatch, add_students, auth, running, submit
from test_web_pages import sign_in


def test_the_worker_reports_each_check_before_its_answer():
    worker = subprocess.Popen([sys.executable, "-m", "graders", "worker", "--device", "cpu",
                               "--warm", "1"], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert json.loads(worker.stdout.readline())["ready"] is True
        reference = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
        worker.stdin.write(json.dumps({"id": 3, "exercise": "safe_softmax",
                                       "file": str(reference)}) + "\n")
        worker.stdin.flush()
        lines = []
        while True:
            line = json.loads(worker.stdout.readline())
            lines.append(line)
            if "result" in line:
                break
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
    checks, answer = lines[:-1], lines[-1]
    assert all(line["id"] == 3 and "check" in line for line in checks)
    names = [c["name"] for c in answer["result"]["checks"]]
    assert sorted(line["check"]["name"] for line in checks) == sorted(names)
    assert all(line["check"]["passed"] for line in checks)
    assert "message" not in checks[0]["check"]  # names and points only, while it runs


def test_a_waiting_student_sees_their_place_and_the_checks_done(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob", "cy")
        ids = {n: submit(client, tokens[n]).json()["id"] for n in ("ada", "bob", "cy")}
        places = {n: client.get(f"/api/submissions/{ids[n]}", headers=auth(tokens[n]))
                  .json()["progress"]["queue_position"] for n in ids}
        assert places == {"ada": 1, "bob": 2, "cy": 3}
        sessions = client.app.state.sessionmaker
        with sessions.begin() as db:  # ada's is taken by a slot
            ada_row = db.get(Submission, ids["ada"])
            ada_row.status, ada_row.attempts = Status.RUNNING, 1
        # kept on the row, where any server process reads it (issue 27); a stale attempt's
        # check is not shown
        record_check(sessions, ids["ada"], 1, {"name": "random_rows", "passed": True,
                                               "points": 15, "max_points": 15})
        record_check(sessions, ids["ada"], 0, {"name": "from_an_old_attempt", "passed": False})
        ada = client.get(f"/api/submissions/{ids['ada']}", headers=auth(tokens["ada"])).json()
        assert ada["progress"]["checks"] == [{"name": "random_rows", "passed": True,
                                              "points": 15, "max_points": 15}]
        assert ada["progress"]["queue_position"] is None
        assert ada["progress"]["checks_total"] == 8  # safe_softmax in Triton
        sign_in(client, tokens["ada"])
        assert "1 of 8 checks done" in client.get(f"/submissions/{ids['ada']}").text
        bob = client.get(f"/api/submissions/{ids['bob']}", headers=auth(tokens["bob"])).json()
        assert bob["progress"]["queue_position"] == 1  # next now
        sign_in(client, tokens["bob"])
        page = client.get(f"/submissions/{ids['bob']}").text
        assert "Waiting in the queue" in page and ": number 1 in line" in page
