"""Real services the tests start: a free port, a throwaway redis-server."""

from __future__ import annotations

import socket
import subprocess
import time


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
