"""Triton's own version key, worked out once per grader process and handed to its runners.

Triton keys every compile by ``triton_key()``: a hash of its compiler's sources and of
libtriton itself, hundreds of MB read. Each runner worked it out again at its first compile:
0.9 s of CPU on the H200 (a runner's profile, docs/benchmarks.md "Lanes"), 0.4 s on the CI's
CPU, for every runner of every grading. The runners read the same installed Triton as this
process, so one answer serves them all: it is worked out here once, in a process of its own
(the grader does not import Triton), and sent with each runner's ``warm`` request
(graders/isolation/pool.py); the runner adopts it before anything compiles
(graders/runner/main.py), and before any submission is loaded. Where it cannot be worked
out, runners hash for themselves, as before.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

log = logging.getLogger(__name__)
_PROGRAM = "from triton.runtime.cache import triton_key; print(triton_key())"
_lock = threading.Lock()
_known: list[str | None] = []  # empty: not tried yet


def triton_key() -> str | None:
    """The installed Triton's key, as its own ``triton_key()`` gives it; None if that failed."""
    with _lock:
        if not _known:
            _known.append(_work_out())
        return _known[0]


def _work_out() -> str | None:
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _PROGRAM], capture_output=True,
                              text=True, timeout=120, env=dict(os.environ))
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("Triton's key not worked out (%s): each runner hashes for itself", exc)
        return None
    key = proc.stdout.strip()
    if proc.returncode != 0 or not key or len(key) > 100_000:
        log.info("Triton's key not worked out: each runner hashes for itself (%s)",
                 proc.stderr.strip()[-300:])
        return None
    return key
