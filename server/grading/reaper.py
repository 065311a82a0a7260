"""The round every dispatcher process runs, so that no grade is lost and no submission
stays ``running`` for ever (issue 39).

Every ``REAPER_INTERVAL_S`` (or a third of ``HEARTBEAT_TIMEOUT_S``, if less) a thread the
dispatcher starts:

1. stores what the outbox holds: results a slot of this host could not store yet, or that
   a killed server left behind (server/grading/outbox.py);
2. renews the leases of the jobs this process's slots hold (``jobs.beat``: one UPDATE for
   all of them). It writes also when there is nothing to renew: that it went through says
   that this process can write;
3. puts back running work whose holder is known to be gone (a server process of this
   machine that no longer runs: server/grading/holders.py), and work whose lease nobody
   renewed for ``HEARTBEAT_TIMEOUT_S`` (``jobs.requeue_stale``): a slot or a whole server
   process that died elsewhere, a remote worker that fell silent, a task the broker lost.

Judging leases waits until this process has been able to write for one whole
``HEARTBEAT_TIMEOUT_S``. While the database takes no write (locked, down) nobody can renew a
lease, and a lease that ran out then says nothing about its grader; once writes go through
again every live grader renews its own within a round, long before the timeout. At start
too: a server that was not running cannot know whether the database was taking writes
meanwhile (nor could remote workers reach a server to renew theirs).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Callable

from sqlalchemy.orm import Session, sessionmaker

from ..core.clock import utcnow
from ..core.settings import Settings
from .jobs import PutBack, beat, database_away, requeue_stale
from .outbox import Outbox, Store

log = logging.getLogger("server.reaper")


class Reaper:
    def __init__(self, sessions: sessionmaker[Session], settings: Settings,
                 live: Callable[[], list[tuple[int, int]]] = list,
                 outbox: Outbox | None = None, store: Store | None = None,
                 gone: Callable[[], list[tuple[int, int]]] = list,
                 on_put_back: Callable[[], None] = lambda: None):
        """``live``: the (submission, attempt) of the jobs this process's slots hold;
        ``outbox`` and ``store``: where results wait here, and how to store one; ``gone``:
        the running jobs whose holder is known to be dead; ``on_put_back``: work waits again
        (the dispatcher's ``notify``)."""
        self.sessions, self.settings = sessions, settings
        self.live, self.outbox, self.store, self.gone = live, outbox, store, gone
        self.on_put_back = on_put_back
        # a lease is renewed at every round: several rounds must fit in its timeout
        self.every_s = min(settings.reaper_interval_s, settings.heartbeat_timeout_s / 3)
        self._writable_since: float | None = None  # monotonic; None: not seen writable yet
        self._away = False  # the last round could not write (said once in the log)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:  # the first round at once: it stores what a killed server left
            try:
                self.round()
            except Exception:  # noqa: BLE001 - a round that failed must not end the rounds
                log.exception("the reaper failed a round")
            if self._stop.wait(self.every_s):
                return

    def round(self) -> PutBack | None:
        """Steps 1 to 3 (the module's docstring); what was put back, None if nothing was
        judged this round."""
        try:
            if self.outbox is not None and not self.outbox.store_waiting(self.store):
                return self._cannot_write("a result in the outbox could not be stored")
            beat(self.sessions, self.live())
            gone = self.gone()
        except Exception as exc:  # noqa: BLE001 - the database away; anything else raised
            if not database_away(exc):
                raise
            return self._cannot_write(str(exc).splitlines()[0][:200])
        now = time.monotonic()
        if self._writable_since is None:
            self._writable_since = now
            if self._away:
                log.warning("the database takes writes again: leases are judged again in "
                            "%g s", self.settings.heartbeat_timeout_s)
            self._away = False
        judge = now - self._writable_since >= self.settings.heartbeat_timeout_s
        if not judge and not gone:
            return None
        return self._put_back(gone, judge)

    def _cannot_write(self, why: str) -> None:
        if not self._away:
            log.warning("the database takes no writes now (%s): results wait, and no lease "
                        "is judged until it has taken them again for %g s", why,
                        self.settings.heartbeat_timeout_s)
        self._away, self._writable_since = True, None
        return None

    def _put_back(self, gone: list[tuple[int, int]], judge: bool) -> PutBack | None:
        """The jobs of holders gone, and when ``judge``, those whose lease ran out."""
        now = utcnow()
        try:
            put = requeue_stale(
                self.sessions,
                published_before=(now - timedelta(seconds=self.settings.publish_timeout_s)
                                  if judge else None),
                heard_before=(now - timedelta(seconds=self.settings.heartbeat_timeout_s)
                              if judge else None),
                max_leases=self.settings.max_grader_attempts, gone=gone)
        except Exception as exc:  # noqa: BLE001
            if not database_away(exc):
                raise
            return self._cannot_write(str(exc).splitlines()[0][:200])
        if put.ids:
            log.warning("put back %d jobs whose grader or broker lost them: %s", len(put.ids),
                        put.ids[:20])
            self.on_put_back()
        if put.ended:
            log.error("ended as error, having lost their grader %d times: %s",
                      self.settings.max_grader_attempts, put.ended)
        return put
