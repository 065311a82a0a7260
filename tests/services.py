"""Real services the tests start: a free port, a throwaway redis-server, the embedded
server on a thread."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import threading
import time
from contextlib import contextmanager


def _ephemeral_low() -> int:
    try:
        return int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port nothing is bound to, for a server a test starts, from below the kernel's
    ephemeral range and from a share of it of this pytest-xdist worker's own.

    A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, where it
    next be the source port of any outgoing connection, and then the server cannot bind it
    (the likeliest reason redis-server did not start in one fresh-clone CI run of five,
    beside a test that opens 1,000 connections at once). Ports below the range are never
    a connection's source, and the other worker picks from another share."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    shares = 4
    low, high = 10000, _ephemeral_low()
    width = (high - low) // shares
    start = low + width * (int(worker) % shares if worker.isdigit() else 0)
    for _ in range(500):
        port = random.randrange(start, start + width)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {start}..{start + width - 1}")


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
        if proc.poll() is not None:
            break  # it exited: its log says why
    proc.kill()
    raise AssertionError(f"redis did not start on port {port} (exit code {proc.poll()})")


@contextmanager
def embedded_server(app, header_timeout_s: float = 10.0, max_per_client: int = 0):
    """``app`` served as ``python -m server`` serves it (server/core/connections.py), on a
    thread and a free port; yields the port and stops the server at the end."""
    import uvicorn

    from server.core.connections import server_config

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


def until(predicate, timeout_s: float = 20.0) -> bool:
    """True as soon as ``predicate()`` is, False if it is not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False
