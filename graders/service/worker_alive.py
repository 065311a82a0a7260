"""Whether a remote grading worker can grade, for its container's healthcheck.

``celery inspect ping`` cannot tell: a solo-pool worker answers no ping while it grades,
and the compose file's ``worker@$$HOSTNAME`` was never expanded in exec form, so the
healthcheck never passed (issue 27). Instead the worker touches ``HEARTBEAT_FILE`` every
``BEAT_S`` seconds from a thread of its own, once its slot is ready and for as long as the
slot stays healthy, grading or not; ``python -m graders.service.worker_alive`` exits 0 while the
file is younger than ``STALE_S``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

HEARTBEAT_FILE = Path(os.environ.get("WORKER_HEARTBEAT_FILE", "/tmp/graders-worker-alive"))
BEAT_S = 10.0
STALE_S = 60.0


def keep_beating(healthy: Callable[[], bool], path: Path = HEARTBEAT_FILE,
                 every_s: float = BEAT_S) -> threading.Event:
    """Touch ``path`` now and every ``every_s`` while ``healthy()``; set the returned
    event to stop. A slot that turns unhealthy stops the beat, and the file goes stale."""
    stop = threading.Event()

    def beat() -> None:
        while healthy() and not stop.is_set():
            path.touch()
            stop.wait(every_s)

    threading.Thread(target=beat, daemon=True, name="alive").start()
    return stop


def is_alive(path: Path = HEARTBEAT_FILE, stale_s: float = STALE_S) -> bool:
    try:
        return time.time() - path.stat().st_mtime < stale_s
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(0 if is_alive() else 1)
