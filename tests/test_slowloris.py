"""Idle and half-sent connections do not take the embedded server down (issue 12, item 2).

Thousands of sockets that connect and send nothing, or send half a request's headers, are
held against the server as `python -m server` runs it (server/connections.py); meanwhile
/api/health must answer within 1 s, and the server must close the silent sockets once
their header deadline passes.
"""

import http.client
import socket
import time

from server.app import create_app
from server.connections import raise_file_limit
from services import embedded_server
from test_server_api import NoDispatch, settings_for

IDLE, HALF = 2000, 500
HEADER_TIMEOUT_S = 3.0


def _health_seconds(port: int) -> float:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/api/health")
    assert conn.getresponse().status == 200
    conn.close()
    return time.monotonic() - started


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.5)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_thousands_of_idle_sockets_leave_health_answering_and_are_closed(tmp_path):
    raise_file_limit()
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), dispatcher=NoDispatch())
    socks = []
    # no cap per address here: this is the header deadline's test, from one address
    with embedded_server(app, HEADER_TIMEOUT_S) as port:
        try:
            for i in range(IDLE + HALF):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                if i >= IDLE:  # a request line and one header, and then nothing more
                    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            time.sleep(0.5)
            worst = max(_health_seconds(port) for _ in range(5))
            print(f"\n{IDLE} idle + {HALF} half-sent sockets: /api/health in {worst * 1000:.0f} ms "
                  "at worst")
            assert worst < 1.0
            time.sleep(HEADER_TIMEOUT_S + 1.5)
            sample = socks[:50] + socks[IDLE:IDLE + 50]
            closed = sum(_closed_by_server(s) for s in sample)
            print(f"closed by the server after {HEADER_TIMEOUT_S:g} s: {closed} of {len(sample)}")
            assert closed == len(sample)
            assert _health_seconds(port) < 1.0
        finally:
            for s in socks:
                s.close()


def test_a_body_sent_too_slowly_gets_408(tmp_path):
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", body_timeout_s=2),
                     dispatcher=NoDispatch())
    with embedded_server(app, HEADER_TIMEOUT_S) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/"
                      b"x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ntoken=ab")
            started = time.monotonic()
            answer = s.recv(4096)
            waited = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408") and 1.5 < waited < 6, (answer[:100], waited)
