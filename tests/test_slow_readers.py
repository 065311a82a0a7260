"""Clients that ask and never read do not starve the others (issue 26, item 2).

Twenty sockets each pipelined 400 `GET /api/exercises/safe_softmax` (15 kB each) with a junk
session cookie and never read a byte. Each stuck answer held a database session while
uvicorn waited to write it, the pool (5 + 10) ran dry, and `/api/submissions` and
`/api/leaderboard` answered nothing for as long as the sockets stayed open. Now no route
holds a session past its function (server/auth/sessions.py's `get_db` is function-scoped), and one
address's connections are capped (server/core/connections.py).
"""

import http.client
import json
import socket
import time
from pathlib import Path

from fastapi.routing import APIRoute

from server.app import create_app
from server.auth.deps import get_db
from services import embedded_server
from test_server_api import ADMIN, NoDispatch, settings_for

READERS, PIPELINED = 20, 400
ASK = (b"GET /api/exercises/safe_softmax HTTP/1.1\r\nHost: x\r\n"
       b"Cookie: autograder_session=junk\r\n\r\n")


def _call(port: int, method: str, path: str, token: str, body=None, timeout=5.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _server_send_queues(port: int, readers: list[socket.socket]) -> list[int]:
    """Bytes the server has written towards each reader that the reader has not taken,
    from the kernel's table of TCP sockets (/proc/net/tcp: tx_queue of the server's end)."""
    wanted = {s.getsockname()[1] for s in readers}
    queues = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        remote_port = int(fields[2].split(":")[1], 16)
        if local_port == port and remote_port in wanted:
            queues[remote_port] = int(fields[4].split(":")[0], 16)
    return [queues.get(p, 0) for p in sorted(wanted)]


def _wait_until_the_server_is_stuck_writing(port: int, readers: list[socket.socket]) -> None:
    """Until the server's send queue to every reader is full and still for 2 s: the server
    then owes each of them answers it cannot write (the state the attack aims for, reached
    in about 8 s here), however slow this machine is."""
    last, still_since = None, time.monotonic()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = _server_send_queues(port, readers)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > 2.0 and all(n > 0 for n in now):
            return
        time.sleep(0.25)
    raise AssertionError(f"the server's send queues never filled: {last}")


def test_twenty_slow_readers_leave_the_api_answering(tmp_path):
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), dispatcher=NoDispatch())
    with embedded_server(app) as port:
        status, body = _call(port, "POST", "/api/admin/students", ADMIN,
                             {"students": [{"username": "ada", "display_name": "Ada"}]})
        assert status == 200, body
        student = json.loads(body)["students"][0]["token"]
        readers = []
        try:
            for _ in range(READERS):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", port))
                s.setblocking(False)
                sent = s.send(ASK * PIPELINED)  # what the kernel takes; the rest is moot
                assert sent > 0
                readers.append(s)
            _wait_until_the_server_is_stuck_writing(port, readers)
            for path in ("/api/submissions", "/api/leaderboard/safe_softmax") * 6:
                started = time.monotonic()
                status, body = _call(port, "GET", path, student)
                took = time.monotonic() - started
                assert status == 200 and took < 2.0, (path, status, took, body[:200])
        finally:
            for s in readers:
                s.close()


def test_no_route_holds_a_database_session_while_its_answer_is_written():
    """Every route's `get_db`, however deep among its dependencies, ends with the route's
    function, not after the response is sent (FastAPI's default for a `yield`)."""
    app = create_app(settings_for("sqlite://"), dispatcher=NoDispatch())
    late = []

    def visit(route: str, dependant) -> None:
        for d in dependant.dependencies:
            if d.call is get_db and d.scope != "function":
                late.append(route)
            visit(route, d)

    def api_routes(routes):
        for r in routes:  # FastAPI keeps an included router whole, as `original_router`
            if isinstance(r, APIRoute):
                yield r
            elif hasattr(r, "original_router"):
                yield from api_routes(r.original_router.routes)

    routes = list(api_routes(app.routes))
    for r in routes:
        visit(r.path, r.dependant)
    assert len(routes) > 30 and late == []


def test_one_address_gets_a_bounded_number_of_connections(tmp_path):
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), dispatcher=NoDispatch())
    with embedded_server(app, max_per_client=8) as port:
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as ninth:
                answer = ninth.recv(4096)
            assert answer.startswith(b"HTTP/1.1 503") and b"too many connections" in answer
            held.pop().close()  # one closes: a new one is served again
            deadline = time.monotonic() + 5
            while True:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as again:
                    again.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
                    answer = again.recv(4096)
                if answer.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                    break
                time.sleep(0.1)  # the server may not have seen the close yet
            assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
        finally:
            for s in held:
                s.close()
