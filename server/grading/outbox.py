"""Finished results kept on disk until the database has them (issue 39).

A slot writes its grading's outcome here before its first try to store it, and removes it
only once the store has committed (or answered that the attempt is over). So a result the
database cannot take yet (locked, down, every connection in use) is not dropped, and one
whose server was killed between the grading and the store is found here when a server of
the same database starts again: the reaper (server/grading/reaper.py) tries every file at
each of its rounds. A store is idempotent per attempt (server/grading/jobs.py answers
"stale" to a second one), so a file stored twice still makes one grade.

- One JSON file per (submission, attempt), written whole or not at all: a temporary file,
  fsync, rename, fsync of the folder.
- One folder per database (a hash of its URL): the servers of two courses on one host never
  store each other's results; the processes of one course on one host share theirs.
- A file is stored under an exclusive flock, so that two threads or processes never store
  one file at once, and the second finds it gone once the first has stored it.
- A file the database refuses for good (a value it cannot hold, say), or that does not
  parse, is moved to ``failed/`` and logged. Its submission's lease is then no longer
  renewed: the reaper puts it back and it is graded again, and its student is not locked
  out by a submission that stays ``running``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Callable

from sqlalchemy.engine import make_url

from ..core.clock import utcnow
from ..core.settings import REPO_ROOT
from .graders_client import GradeOutcome
from .jobs import database_away

log = logging.getLogger("server.outbox")
FIRST_RETRY_S, LAST_RETRY_S = 0.5, 10.0  # a slot's tries: doubling from one to the other
Store = Callable[[int, int, GradeOutcome], str]  # jobs.store for one dispatcher
# what a try comes to; after "later" (the database is away) or "busy" (another is storing
# it now) the result is still to be stored
SETTLED = ("stored", "retry", "stale", "gone", "set aside")


def folder_for(url: str, outbox_dir: str = "") -> Path:
    """``OUTBOX_DIR`` (or beside the SQLite file, or var/outbox), then the database's own."""
    if outbox_dir:
        base = Path(outbox_dir)
    elif url.startswith("sqlite") and url.split("///", 1)[-1] not in ("", ":memory:"):
        base = Path(url.split("///", 1)[-1]).parent / "outbox"
    else:
        base = REPO_ROOT / "var" / "outbox"
    named = make_url(url).render_as_string(hide_password=True)  # its password is not its name
    return base / hashlib.sha256(named.encode()).hexdigest()[:16]


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Outbox:
    def __init__(self, folder: Path):
        self.folder = folder

    # -- the files ----------------------------------------------------------------------
    def keep(self, job_id: int, attempt: int, outcome: GradeOutcome) -> Path | None:
        """Write the outcome down for good; None if the disk refused it (then it is stored
        from memory, with the same retries, and lost only if this process dies too)."""
        path = self.folder / f"{job_id:09d}-{attempt}.json"
        tmp = self.folder / f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp"
        try:
            body = json.dumps({"submission": job_id, "attempt": attempt,
                               "outcome": dataclasses.asdict(outcome),
                               "kept_at": utcnow().isoformat()}).encode()
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            _fsync_folder(self.folder)  # the rename itself survives a power cut
            return path
        except (OSError, TypeError, ValueError):
            log.exception("the result of submission %d (attempt %d) could not be kept in %s; "
                          "it is stored from memory", job_id, attempt, self.folder)
            tmp.unlink(missing_ok=True)
            return None

    def waiting(self) -> list[Path]:
        return sorted(self.folder.glob("*.json"))

    def tidy(self) -> None:
        """At a clean stop: the database's folder goes if it holds nothing (``keep`` makes
        it again), so that a folder left behind says that results wait in it."""
        try:
            self.folder.rmdir()
        except OSError:
            pass  # not empty (or never made): it stays

    def _set_aside(self, path: Path, why: str) -> str:
        failed = self.folder / "failed"
        failed.mkdir(mode=0o700, exist_ok=True)
        os.replace(path, failed / path.name)
        log.error("the result in %s cannot be stored (%s): set aside in %s; its submission "
                  "is put back when its lease runs out, and graded again", path.name, why,
                  failed)
        return "set aside"

    # -- storing them -------------------------------------------------------------------
    def try_store(self, path: Path, store: Store) -> str:
        """One try at the file: what ``store`` answered (the file removed), or "gone",
        "busy", "later" (the database is away; the file stays) or "set aside"."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return "gone"
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return "busy"
            if os.fstat(fd).st_nlink == 0:
                return "gone"  # stored and removed by whoever held it before us
            try:
                held = json.loads(path.read_bytes())
                job_id, attempt = int(held["submission"]), int(held["attempt"])
                outcome = GradeOutcome(**held["outcome"])
            except (ValueError, KeyError, TypeError) as exc:
                return self._set_aside(path, f"it does not parse: {exc}")
            try:
                answer = store(job_id, attempt, outcome)
            except Exception as exc:  # noqa: BLE001 - sorted below: away, or refused for good
                if database_away(exc):
                    log.info("%s waits: %s", path.name, str(exc).splitlines()[0][:200])
                    return "later"
                log.exception("storing %s failed", path.name)
                return self._set_aside(path, type(exc).__name__)
            path.unlink(missing_ok=True)  # committed (or over): done with it
            return answer
        finally:
            os.close(fd)

    def store_waiting(self, store: Store) -> bool:
        """One try at every file; False as soon as the database is away."""
        for path in self.waiting():
            answer = self.try_store(path, store)
            if answer == "later":
                return False
            if answer in ("stored", "retry", "stale"):
                log.warning("%s stored from the outbox: %s", path.name, answer)
        return True

    def until_stored(self, job_id: int, attempt: int, outcome: GradeOutcome, store: Store,
                     pause: Callable[[float], bool]) -> str:
        """Keep the outcome, then try to store it until it is, waiting longer each time
        (``pause(seconds)`` answers True when the process stops: the file stays, and the
        next start stores it). Returns what the store answered, or "kept"."""
        path = self.keep(job_id, attempt, outcome)
        delay, tries = FIRST_RETRY_S, 0
        while True:
            tries += 1
            answer = (self.try_store(path, store) if path is not None
                      else _from_memory(job_id, attempt, outcome, store))
            if answer in SETTLED:
                if answer == "gone":  # the reaper's round stored it between two of our tries
                    log.info("the result of submission %d (attempt %d) was stored from the "
                             "outbox", job_id, attempt)
                elif tries > 1:
                    log.warning("the result of submission %d (attempt %d) stored after %d "
                                "tries: %s", job_id, attempt, tries, answer)
                return answer
            if tries == 1 and answer == "later":
                log.warning("the database cannot take the result of submission %d (attempt "
                            "%d) now: kept in %s and tried again until it can", job_id,
                            attempt, self.folder)
            if pause(delay):
                return "kept"
            delay = min(delay * 2, LAST_RETRY_S)


def _from_memory(job_id: int, attempt: int, outcome: GradeOutcome, store: Store) -> str:
    try:
        return store(job_id, attempt, outcome)
    except Exception as exc:  # noqa: BLE001
        if database_away(exc):
            return "later"
        log.exception("storing the result of submission %d (attempt %d) failed for good; it "
                      "is put back when its lease runs out", job_id, attempt)
        return "set aside"
