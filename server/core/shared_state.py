"""In-memory views kept right across several server processes (issue 27).

A server process keeps some views in memory and clears them when a commit of its own
changed what they show (server/core/commit_hooks.py): the leaderboards (server/domain/board_cache.py) and the
signed-in readers (server/auth/readers.py). With two processes behind a proxy, or two hosts, the
other process's commits must clear them too. So:

- **The writer stamps.** Just before a transaction that noted such a change commits, it
  raises a counter per change (``change_stamps``: ``"boards_changed:safe_softmax"``, say) in
  the same transaction: a change and its stamp commit together or not at all.
- **Every process watches.** A thread reads the stamps every ``WATCH_S`` and applies those
  that grew, as its own commits apply theirs: another process's change is seen here within
  about a second; this process's own at once.

Keys are sorted before they are raised, so two transactions never wait on each other's
stamps in opposite orders.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from .commit_hooks import on_commit

log = logging.getLogger("server.shared_state")
WATCH_S = 1.0
_OWN = "shared_state_own_stamps"  # a session's raised stamps, in session.info

_shared: dict[str, Callable[[set[str]], None]] = {}  # note key -> how a change is applied
# (database, stamp key) -> the highest stamp applied here (a server serves one database;
# a test process serves many, whose stamps are each their own)
_seen: dict[tuple[str, str], int] = {}
_seen_lock = threading.Lock()

_RAISE = text("INSERT INTO change_stamps (key, stamp) VALUES (:key, 1) "
              "ON CONFLICT (key) DO UPDATE SET stamp = change_stamps.stamp + 1 "
              "RETURNING stamp")


def share(note_key: str, apply: Callable[[set[str]], None]) -> None:
    """Apply what a commit noted under ``note_key`` (server/commits.note): in this process
    once the commit is done (server/commits.on_commit), and through the database in every
    other server process within ``WATCH_S``."""
    on_commit(note_key, apply)
    _shared[note_key] = apply


@event.listens_for(Session, "before_commit")
def _raise_stamps(session: Session) -> None:
    if session.new or session.dirty or session.deleted:
        session.flush()  # the last flush notes what it changes; before_commit runs first
    keys = sorted(f"{k}:{v}" for k in _shared for v in session.info.get(k, ()))
    if not keys:
        return
    connection = session.connection()  # Core: no ORM event sees the stamps' own writes
    own = session.info.setdefault(_OWN, {})
    for key in keys:
        own[key] = connection.execute(_RAISE, {"key": key}).scalar_one()


@event.listens_for(Session, "after_commit")
def _remember_own(session: Session) -> None:
    own = session.info.pop(_OWN, None)
    if own:  # applied here already (server/commits.on_commit): the watcher skips them
        database = str(session.get_bind().url)
        with _seen_lock:
            for key, stamp in own.items():
                _seen[database, key] = max(_seen.get((database, key), 0), stamp)


@event.listens_for(Session, "after_rollback")
def _forget_own(session: Session) -> None:
    session.info.pop(_OWN, None)


def apply_new_stamps(engine: Engine, first: bool = False) -> int:
    """Apply the changes other processes stamped since the last look; how many keys.
    ``first``: only learn where the stamps stand (nothing is cached yet)."""
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT key, stamp FROM change_stamps")).all()
    grown: dict[str, set[str]] = {}
    database = str(engine.url)
    with _seen_lock:
        for key, stamp in rows:
            if stamp > _seen.get((database, key), 0):
                _seen[database, key] = stamp
                note_key, _, value = key.partition(":")
                if not first and note_key in _shared:
                    grown.setdefault(note_key, set()).add(value)
    for note_key, values in grown.items():
        _shared[note_key](values)
    return sum(len(v) for v in grown.values())


class StampWatcher:
    """The thread that applies other processes' changes, every ``WATCH_S``."""

    def __init__(self, engine: Engine, every_s: float = WATCH_S):
        self.engine, self.every_s = engine, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        apply_new_stamps(self.engine, first=True)
        self._thread = threading.Thread(target=self._run, name="stamp-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                apply_new_stamps(self.engine)
            except Exception:  # noqa: BLE001 - a database hiccup must not end the watch
                log.exception("reading the change stamps failed")
