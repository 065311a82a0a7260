"""Real services the tests start: a free port, a throwaway redis-server, the embedded
server on a thread."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int, log=subprocess.DEVNULL) -> subprocess.Popen:
    """redis-server on ``port``, keeping nothing on disk: a kill -9 loses every message."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                             "--appendonly", "no"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("redis did not start")


@contextmanager
def embedded_server(app, header_timeout_s: float = 10.0, max_per_client: int = 0):
    """``app`` served as ``python -m server`` serves it (server/connections.py), on a
    thread and a free port; yields the port and stops the server at the end."""
    import uvicorn

    from server.connections import server_config

    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, header_timeout_s,
                                          max_per_client))
    server.config.log_level = "warning"
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.started, "the server did not start"
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)
