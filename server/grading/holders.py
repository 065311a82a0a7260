"""Who holds a job graded by a local slot, in words another process of this machine can check.

A slot writes its holder into the submission's ``worker`` when it claims it:
``host/slot@machine:pid``, where ``machine`` names this boot of this machine and this PID
namespace. Any server process of the same machine (the same boot, the same PID namespace)
can tell that the holder is gone (no such process, or a zombie) and put the job back at
once, rather than when its lease runs out: a server killed and started again, or its peer on
the same host, takes its work up at once. A holder anywhere else (another host, another
container), or whose PID another process has taken since, waits for its lease to run out
(server/grading/reaper.py): a live process is never judged gone.
"""

from __future__ import annotations

import os
import re
import socket
from functools import lru_cache
from pathlib import Path
from typing import Iterable

_HOLDER = re.compile(r"@([0-9a-f]+\.\d+):(\d+)$")


@lru_cache(maxsize=1)
def machine() -> str:
    """This boot of this machine and this PID namespace: where a PID means one process."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return "0.0"  # no /proc: nothing is ever judged gone here
    return f"{boot}.{namespace}"


def holder(slot: str) -> str:
    return f"{socket.gethostname()[:40]}/{slot[:40]}@{machine()}:{os.getpid()}"


def _runs(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie grades nothing


def gone_here(rows: Iterable[tuple[int, int, str | None]]) -> list[tuple[int, int]]:
    """Of running jobs' (submission, attempt, worker): those whose holder was a process of
    this machine that no longer runs."""
    here = machine()
    if here == "0.0":
        return []
    gone = []
    for sid, attempt, worker in rows:
        match = _HOLDER.search(worker or "")
        if match and match.group(1) == here and not _runs(int(match.group(2))):
            gone.append((sid, attempt))
    return gone
