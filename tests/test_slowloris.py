"""Idle and half-sent connections do not take the embedded server down (issue 12, item 2).

Thousands of sockets that connect and send nothing, or send half a request's headers, are
held against the server as `python -m server` runs it (server/core/connections.py); meanwhile
/api/health must answer within 1 s, and the server must close the silent sockets once
their header deadline passes.
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import time

from conftest import REPO
from server.app import create_app
from server.core.connections import raise_file_limit
from services import embedded_server, free_port
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


def test_a_thousand_slow_bodies_at_once_leave_health_answering_another_client(tmp_path):
    """Issue 26, item 11: 1,000 requests whose bodies never come, sent at once from one
    address, then cut off together at the body deadline. /api/health, asked from another
    address every 50 ms throughout, answered in 1.2-1.8 s at their arrival: the loop ran
    them first come, first served, and a full garbage collection of what they made paused
    it for 0.3 s. The issue asks for a second on a busy machine.

    The server is `python -m server` in a process of its own, as it runs for real; it, the
    attacker and the sampler run at one priority above the rest of the machine, so the
    other pytest process's work is not what this measures. There, without turns and the
    frozen heap (server/core/fairness.py, server/__main__.py), health took 580-610 ms at worst;
    with them 190-320 ms (170-270 ms beside two busy loops at the usual priority).

    The bound is the issue's second. It was 0.5 s, between the two, until the same box ran
    about twice as slow (2026-12) and the server with its turns took 560-700 ms: a bound
    that tells them apart on one machine's speed fails a right server on another's. First
    come, first served (the regression this guards) took 1.2-1.8 s on the fast box; the
    turns' order and the frozen heap are held apart from speed by the tests below and
    test_python_m_server_freezes_what_it_built_before_it_serves."""
    port = free_port()
    body_timeout_s = 3
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
               ADMIN_TOKEN="slow-bodies-admin-token-0123", GRADER_DEVICE="cpu",
               GRADER_COMMAND=f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}",
               BODY_TIMEOUT_S=str(body_timeout_s))
    ahead = ["nice", "-n", "-10"] if os.geteuid() == 0 else []
    server = subprocess.Popen([*ahead, sys.executable, "-m", "server", "--port", str(port)],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        _wait_for_health(port)
        # the route answers once before the attack (FastAPI builds a route on first use)
        _post_signin(port, b"token=nobody")
        sampler = subprocess.Popen(
            [*ahead, sys.executable, str(REPO / "tests" / "health_sampler.py"), str(port),
             str(1 + body_timeout_s + 3), "127.0.0.2"], stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        attacker = subprocess.run(
            [*ahead, sys.executable, str(REPO / "tests" / "slow_bodies.py"), str(port), "1000",
             str(body_timeout_s + 2)], capture_output=True, text=True, timeout=120)
        samples = json.loads(sampler.communicate(timeout=60)[0])
        worst = max(seconds for seconds, _ in samples)
        print(f"\n1,000 slow bodies at once: /api/health from another address in "
              f"{worst * 1000:.0f} ms at worst over {len(samples)} samples")
        assert all(status == 200 for _, status in samples), samples
        assert worst < 1.0
        # each is answered: the address's budget in flight waits for its body's 408, the
        # rest are refused at once (issue 39)
        cut_off, refused = map(int, attacker.stdout.split())
        assert cut_off + refused == 1000 and 0 < cut_off <= 64, attacker
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_python_m_server_freezes_what_it_built_before_it_serves(tmp_path, monkeypatch):
    """The frozen heap half of item 11: by the time uvicorn serves, what `python -m server`
    imported and built is out of the collector's sight (a full collection walked it all
    and paused every client for 290-310 ms)."""
    import gc

    import uvicorn

    import server.__main__ as entry

    frozen_when_served: list[bool] = []

    def serve(self, *args, **kwargs):
        # the app it built is frozen (out of the collector's generations), not only
        # whatever this test process held before
        app = self.config.app
        frozen_when_served.append(
            gc.get_freeze_count() > 0 and all(o is not app for o in gc.get_objects()))

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite'}")
    monkeypatch.setenv("ADMIN_TOKEN", "freeze-check-admin-token-0123")
    monkeypatch.setenv("GRADER_DEVICE", "cpu")
    monkeypatch.setenv("GRADER_COMMAND", f"{sys.executable} {REPO / 'tests' / 'fake_grader.py'}")
    monkeypatch.setattr(sys, "argv", ["server", "--port", str(free_port())])
    gc.unfreeze()
    try:
        entry.main()
    finally:
        gc.unfreeze()
    assert frozen_when_served == [True]


def _wait_for_health(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            _health_seconds(port)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the server did not start")


def _post_signin(port: int, body: bytes) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/signin", body=body,
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    conn.getresponse().read()
    conn.close()


def test_a_request_from_another_address_starts_within_two_turns_of_a_burst():
    """FairStart (server/core/fairness.py) on its own: 1,000 requests from one address arrive
    in one turn of the loop, then one from another address. First come, first served, it
    started 1,001st; in turns it starts within the next two turns' worth of requests."""
    import asyncio

    from server.core.fairness import FairStart

    started: list[str] = []

    async def app(scope, receive, send):
        started.append(scope["client"][0])
        await asyncio.sleep(0)

    fair = FairStart(app, per_turn=32)

    def request(address: str):
        return fair({"type": "http", "client": (address, 1)}, None, None)

    async def burst_then_one_more():
        burst = [asyncio.create_task(request("10.0.0.1")) for _ in range(1000)]
        await asyncio.sleep(0)  # the burst's first steps: 32 start, the rest wait their turn
        other = asyncio.create_task(request("10.0.0.2"))
        await asyncio.gather(*burst, other)

    asyncio.run(burst_then_one_more())
    assert len(started) == 1001
    assert started.index("10.0.0.2") < 3 * 32


def test_the_server_lets_requests_in_by_turns_before_anything_else_runs(tmp_path):
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), dispatcher=NoDispatch())
    from server.core.body_limits import BodyLimit
    from server.core.fairness import FairStart
    from server.core.principal_limits import PrincipalLimits

    order = [m.cls for m in app.user_middleware]  # outermost first
    # a principal past its budget is refused before it waits for a turn (issue 39); a
    # request waiting its turn has not started its body's clock
    assert issubclass(order[0], PrincipalLimits) and order[1] is FairStart
    assert order.index(FairStart) < order.index(BodyLimit)
