"""A control group per grading job: memory and process caps, and a reliable kill.

Works with cgroup v1 (``memory`` and ``pids`` hierarchies) and v2 (one unified
hierarchy), under the cgroup this process already lives in. Where neither can
be written (not root, a read-only mount) ``JobCgroup.create`` returns None and
the caller falls back to rlimits; the run says so in its log.
"""

from __future__ import annotations

import logging
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

from graders.isolation.killing import kill_until_gone

log = logging.getLogger(__name__)
ROOT = Path("/sys/fs/cgroup")


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    except OSError:
        pass
    return paths


def cgroups_disabled() -> bool:
    """GRADERS_NO_CGROUP=1: behave as a host with no cgroup to give (tests, operators)."""
    return os.environ.get("GRADERS_NO_CGROUP", "") not in ("", "0")


def cgroups_usable() -> bool:
    """Whether a job cgroup with memory and pids limits can be made here, now."""
    if cgroups_disabled():
        return False
    group = JobCgroup.create(1 << 30, 64)
    if group is None:
        return False
    group.remove()
    return True


def _sigkill_each(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class JobCgroup:
    version: int
    dirs: list[Path]  # v1: [memory dir, pids dir]; v2: [the one dir]

    @classmethod
    def create(cls, memory_bytes: int, max_pids: int) -> "JobCgroup | None":
        name = f"graders-{uuid.uuid4().hex[:12]}"
        own = _own_paths()
        try:
            if (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
                mem = ROOT / "memory" / own.get("memory", "/").lstrip("/") / name
                pids = ROOT / "pids" / own.get("pids", "/").lstrip("/") / name
                mem.mkdir()
                try:
                    pids.mkdir()
                except OSError:
                    mem.rmdir()
                    raise
                group = cls(1, [mem, pids])
                (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
                try:  # no swap either, where the kernel accounts it
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                except OSError:
                    pass
                (pids / "pids.max").write_text(str(max_pids))
                return group
            if (ROOT / "cgroup.controllers").is_file():
                parent = ROOT / own.get("", "/").lstrip("/")
                path = parent / name
                path.mkdir()
                group = cls(2, [path])
                (path / "memory.max").write_text(str(memory_bytes))
                try:
                    (path / "memory.swap.max").write_text("0")
                except OSError:
                    pass
                (path / "pids.max").write_text(str(max_pids))
                return group
        except OSError as exc:
            log.info("no job cgroup (%s): falling back to rlimits", exc)
            try:
                group.remove()  # type: ignore[possibly-undefined]
            except Exception:  # noqa: BLE001
                pass
        return None

    @property
    def procs_files(self) -> list[str]:
        """Where a process writes its pid to join (each hierarchy's cgroup.procs)."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return sorted(found)

    def oom_killed(self) -> bool:
        try:
            if self.version == 1:
                text = (self.dirs[0] / "memory.oom_control").read_text()
                kills = dict(line.split() for line in text.splitlines()).get("oom_kill", "0")
                failcnt = int((self.dirs[0] / "memory.failcnt").read_text())
                return int(kills) > 0 or (failcnt > 0 and "oom_kill" not in text)
            events = dict(line.split() for line in (self.dirs[0] / "memory.events").read_text()
                          .splitlines())
            return int(events.get("oom_kill", 0)) > 0
        except (OSError, ValueError):
            return False

    def kill_all(self, wait_s: float = 5.0) -> bool:
        """SIGKILL every process in the group until it is empty; True when it is. False
        once ``wait_s`` passes with none of them gone (graders.isolation.killing)."""
        if self.version == 2:
            try:
                (self.dirs[0] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        return kill_until_gone(self.pids, _sigkill_each, wait_s)

    def remove(self) -> None:
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass
