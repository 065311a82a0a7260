"""How many lanes a grading takes, from how many gradings this host is running (issue 43).

A grading's lanes are runners that share its checks: more lanes answer one student sooner,
and each costs the host a runner made again and its own compiles. Measured on the H200's
16 cores (docs/benchmarks.md, "Lanes"), the three references one at a time:

    lanes   p50 s   CPU-seconds a grading   cores it keeps busy
      1     10.1          17.6                    1.7
      2      7.1          23.4                    3.3
      4      6.0          37.2                    6.2
      8      8.7          61.1                    7.0

So a host alone with one grading gives it 4 lanes (the quickest answer), and a host whose
slots all grade at once gives each 2: every student waits a little longer, and the class's
gradings an hour go up by half. Never 1: a grading on one lane takes over 10 s.

Each slot (one worker process) marks itself busy while it grades by holding an exclusive
``flock`` on a file of its own in the host's lock folder (the GPU gate's,
``GRADERS_GPU_LOCK_DIR``); counting the marks is trying each file without blocking. A
dead process's lock goes with it, so nothing stale is counted.

The marks miss a burst: its first gradings start within milliseconds of each other, each
before its neighbours have marked themselves, and on the H200's load bench the four slots'
first gradings counted 1, 2, 3 and 4 (13 lanes, 13 runners taken and made again at once).
So a sender that knows its queue says how many gradings the host is about to run
(``host_gradings`` in the worker's job line: the server's local pool counts its slots grading
and the jobs waiting), and the slot sizes the lanes by the larger of the two counts. A
Celery worker's tasks say nothing of the kind (its queue is the broker's, shared by every
host): its slots count alone, as before.

Neither count sees a burst that arrives over a second, as a class's does (the load bench's
first four gradings were each claimed with 0-2 jobs waiting). So a grading counts the marks
again between its parts, and a lane past what the count gives it now leaves
(graders.engine.lanes.LaneSet._shed): a grading that started alone gives back its extra
lanes once its neighbours are grading too.
"""

from __future__ import annotations

import fcntl
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

CORES_PER_LANE = 1.6  # a lane's share of the cores its grading keeps busy (table above)
MOST_LANES = 4
LEAST_LANES = 2
MARK_PREFIX = "busy-"


def lanes_for(busy: int, cores: int, most: int = MOST_LANES, least: int = LEAST_LANES) -> int:
    """The lanes of a grading that starts while ``busy`` gradings (itself included) run on
    a host of ``cores`` cores: as many as the cores give each, within [least, most]."""
    share = int(cores / (max(1, busy) * CORES_PER_LANE))
    return max(least, min(most, share))


def host_cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class BusyMarks:
    """This slot's mark in ``folder``, and the count of every slot's."""

    def __init__(self, folder: Path, name: str):
        self.folder = folder
        self.path = folder / f"{MARK_PREFIX}{os.getpid()}-{name}"
        self._said_why = False

    @contextmanager
    def busy(self) -> Iterator[int]:
        """Marks this slot busy while the block runs; yields the gradings running on this
        host now, this one included (1 where the folder cannot be used)."""
        fd = None
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if not self._said_why:  # once: a folder that cannot be used stays so
                self._said_why = True
                log.info("no busy mark in %s (%s): each grading counts itself alone",
                         self.folder, exc)
            if fd is not None:
                os.close(fd)
            fd = None
        try:
            yield self.count() if fd is not None else 1
        finally:
            if fd is not None:
                os.close(fd)  # the lock goes with it

    def count(self) -> int:
        """The slots holding their mark now (this one's included, if it holds it)."""
        busy = 0
        try:
            names = [p for p in self.folder.iterdir() if p.name.startswith(MARK_PREFIX)]
        except OSError:
            return 1
        for path in names:
            if path == self.path:
                busy += 1  # ours: flock on a second description of it would block on us
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # removed meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                busy += 1
            except OSError:
                pass
            finally:
                os.close(fd)
        return max(1, busy)

    def remove(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass
