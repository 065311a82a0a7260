"""A uid of its own for each runner, where no cgroup caps a job's processes.

A job cgroup with ``pids.max`` is the first choice (graders/isolation/cgroups.py). A host that runs
the grader as root without a delegated cgroup (a container; the H200 machine) has none,
and there RLIMIT_NPROC does not hold either: the sandbox's uid 65534 is root outside its
user namespace, and the kernel exempts root from the limit. A fork bomb then ran its
full 300 s and starved the host (issue 12).

So there each runner is started as an unprivileged uid of its own (isolate does the
same, one uid per box): the launch shim drops to it before bubblewrap starts, bubblewrap
then builds its sandbox as that user, and RLIMIT_NPROC counts that uid's processes alone.
Killing by uid is as reliable as a cgroup: a helper that becomes the uid sends SIGKILL to
every process it may signal (``kill(-1)``), which takes a fork bomb's children and any
double-forked daemon with it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from graders.isolation.killing import kill_until_gone

UID_BASE = int(os.environ.get("GRADERS_JOB_UID_BASE", "61000"))
UID_COUNT = 1000


class NoJobUid(Exception):
    """No free uid in the range (every one has live processes or is in use)."""


def process_statuses() -> Iterator[tuple[int, dict[str, str]]]:
    """Each process's pid and the fields of its /proc/<pid>/status (``Uid``, ``State``,
    ``Threads``…); a process that ends while it is read is skipped."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "status").read_text()
        except OSError:
            continue
        yield int(entry.name), dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def descendants_of(pid: int) -> list[int]:
    """``pid`` and every process below it (by parent pid, from /proc)."""
    children: dict[int, list[int]] = {}
    for child, fields in process_statuses():
        try:
            children.setdefault(int(fields["PPid"].strip()), []).append(child)
        except (ValueError, KeyError):
            continue
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def _uid_and_state(name: str) -> tuple[int, bool] | None:
    """(real uid, is a zombie) of process ``name`` from its /proc status, or None once it
    is gone. Only the two fields are parsed: a scan reads every process on the host, and
    one watch of each runner's job reads them five times a second."""
    try:
        fd = os.open(f"/proc/{name}/status", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)  # State and Uid are near the top, well within a page
    except OSError:
        return None
    finally:
        os.close(fd)
    state, uid = data.find(b"\nState:"), data.find(b"\nUid:")
    if state < 0 or uid < 0:
        return None
    try:
        return int(data[uid + 5:].split(None, 1)[0]), data[state + 7:].lstrip()[:1] == b"Z"
    except (ValueError, IndexError):
        return None


class ProcessTable:
    """The host's processes by real uid, from one scan of /proc shared by every caller.

    Each runner's watch counts its job's processes five times a second
    (graders.isolation.launch.PROCESS_POLL_S), and a scan of a host with a few hundred
    processes costs ~10 ms of CPU: on the H200, with two lanes a grading, one scan per
    watch was 1.6 CPU-seconds of every grading (docs/benchmarks.md). A caller that can
    take a view ``max_age`` seconds old shares the last scan; 0 always scans."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._by_uid: dict[int, list[tuple[int, bool]]] = {}

    def _scan(self) -> dict[int, list[tuple[int, bool]]]:
        by_uid: dict[int, list[tuple[int, bool]]] = {}
        with os.scandir("/proc") as entries:
            for entry in entries:
                if entry.name.isdigit() and (got := _uid_and_state(entry.name)) is not None:
                    by_uid.setdefault(got[0], []).append((int(entry.name), got[1]))
        return by_uid

    def of(self, uid: int, zombies: bool, max_age: float) -> list[int]:
        with self._lock:  # one scan at a time: a thread that waited shares the one made
            now = time.monotonic()
            if now - self._at >= max_age:  # with 0, always
                self._by_uid, self._at = self._scan(), now
            rows = self._by_uid.get(uid, [])
        return [pid for pid, zombie in rows if zombies or not zombie]


PROCESSES = ProcessTable()


def processes_of(uid: int, zombies: bool = False, max_age: float = 0.0) -> list[int]:
    """The live pids whose real uid is ``uid``, from /proc (with ``zombies``: the dead
    ones not yet reaped as well; they still count against the uid's RLIMIT_NPROC), from a
    scan at most ``max_age`` seconds old (``ProcessTable``; 0: a scan made now).

    Zombies are left out: they run nothing and hold nothing but their pid until reaped.
    A killed sandbox's inner bubblewrap is re-parented to the host's init, which may reap
    it seconds later (the H200 machine's does); waiting for it held every runner's close,
    and so every grading, by about 2 s."""
    return PROCESSES.of(uid, zombies, max_age)


_KILL_ALL_AS = ("import os, signal, sys; u = int(sys.argv[1]); os.setgroups([]); "
                "os.setresgid(u, u, u); os.setresuid(u, u, u); os.kill(-1, signal.SIGKILL)")


def kill_uid(uid: int, wait_s: float = 5.0) -> bool:
    """SIGKILL every process of ``uid`` until none is left; True when none is. False once
    ``wait_s`` passes with none of them gone (graders.isolation.killing)."""
    def kill_as_uid(_pids: list[int]) -> None:
        # a helper process becomes the uid and signals all it may signal: kill(-1)
        subprocess.run([sys.executable, "-I", "-c", _KILL_ALL_AS, str(uid)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)

    return kill_until_gone(lambda: processes_of(uid), kill_as_uid, wait_s)


LOCK_DIR = Path(os.environ.get("GRADERS_JOB_UID_LOCKS", "/run/graders-job-uids"))


class JobUids:
    """Hands out uids from [base, base + count), one per runner.

    A uid is held through a lock file (``flock``), so graders running side by side on one
    host never share one, and a grader that dies lets go of its uids with its last breath.
    A free uid that still has processes was left by such a grader: they are killed first.
    """

    def __init__(self, base: int = UID_BASE, count: int = UID_COUNT):
        self.base, self.count = base, count
        self._held: dict[int, int] = {}  # uid -> the open lock file
        self._next = base
        self._lock = threading.Lock()

    def acquire(self) -> int:
        LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._lock:
            for _ in range(self.count):
                uid = self._next
                self._next = self.base + (self._next + 1 - self.base) % self.count
                if uid in self._held:
                    continue
                fd = os.open(LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue  # another grader holds it
                if processes_of(uid) and not kill_uid(uid, wait_s=1.0):
                    os.close(fd)
                    continue
                self._held[uid] = fd
                return uid
        raise NoJobUid(f"no free job uid in {self.base}..{self.base + self.count - 1}")

    def release(self, uid: int) -> bool:
        """Kill what the uid left behind and give it back; False if something survived."""
        clean = kill_uid(uid)
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # the lock goes with it
        return clean


def needed() -> bool:
    """Job uids are how a root grader without a job cgroup caps processes."""
    return os.geteuid() == 0
