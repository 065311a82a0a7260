"""A long roster does not hold up the server (issue 26, item 6).

A 3,000-student roster was issued on the event loop, one query per student: the whole server,
`/api/health` included, waited 2.6 s. It is issued on a thread now, in batches.
"""

import http.client
import json
import threading
import time

from server.app import create_app
from services import embedded_server
from test_server_api import ADMIN, NoDispatch, settings_for

STUDENTS = 3000


def _post_roster(port: int, students: list[dict]) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/api/admin/students", body=json.dumps({"students": students}),
                 headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})
    answer = conn.getresponse()
    return answer.status, json.loads(answer.read())


def test_a_3000_student_roster_leaves_health_answering(tmp_path):
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), dispatcher=NoDispatch())
    roster = [{"username": f"s{i:05d}", "display_name": f"Student {i}"} for i in range(STUDENTS)]
    with embedded_server(app) as port:
        waits, stop = [], threading.Event()

        def poll_health():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            while not stop.is_set():
                started = time.perf_counter()
                conn.request("GET", "/api/health")
                conn.getresponse().read()
                waits.append(time.perf_counter() - started)
                time.sleep(0.01)

        poller = threading.Thread(target=poll_health)
        poller.start()
        try:
            first = _post_roster(port, roster)  # all new
            again = _post_roster(port, roster)  # all re-issued
        finally:
            stop.set()
            poller.join()
        print(f"\n/api/health worst {max(waits) * 1000:.0f} ms over {len(waits)} requests "
              f"during two {STUDENTS}-student rosters")
        assert first[0] == 200 and again[0] == 200
        assert len(first[1]["students"]) == len(again[1]["students"]) == STUDENTS
        assert {s["token"] for s in first[1]["students"]}.isdisjoint(
            s["token"] for s in again[1]["students"])
        # on the event loop it was 2.6 s on the box of the time; in turns, 0.2-0.5 s there
        # and up to 0.51 s on the same box running about twice as slowly (2026-12): the
        # bound tells the two apart on either
        assert max(waits) < 1.0
        # an instructor's name anywhere refuses the whole roster, and changes nothing
        status, body = _post_roster(port, roster[:10] + [
            {"username": "instructor", "display_name": "Mallory"}])
        assert status == 409 and "instructor" in body["detail"]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/submissions",
                     headers={"Authorization": f"Bearer {again[1]['students'][0]['token']}"})
        assert conn.getresponse().status == 200  # s00000's token from the second roster
