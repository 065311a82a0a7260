"""Wake whoever waits on a key when it changes: async waiters, woken from any thread.

The progress streams waited by reading the database once a second each (issue 39: 100
open streams were 100 reads a second, on 100 threadpool turns). Now a stream waits here on
its key and reads only when woken. Whoever stores a change publishes its keys (from a
commit hook, on any thread); a change stored by another server process arrives the same
way through the change stamps (server/core/shared_state.py).

A waiter passes the versions it last saw, so a change published between its read and its
wait is not missed: ``wait`` returns at once when a key has moved on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

EVERY = "*"  # a key that wakes every waiter (a change whose keys are not known)


class ChangeFeed:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[str, int] = {}
        self._every = 0  # the version of EVERY
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Future]]] = {}

    def versions(self, keys: tuple[str, ...]) -> tuple[int, ...]:
        with self._lock:
            return self._versions_of(keys)

    def _versions_of(self, keys: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(self._versions.get(key, 0) + self._every for key in keys)

    def publish(self, keys: Iterable[str]) -> None:
        """These keys changed: wake their waiters (all waiters, for ``EVERY``)."""
        woken = []
        with self._lock:
            for key in keys:
                if key == EVERY:
                    self._every += 1
                    woken.extend({w for waiting in self._waiters.values() for w in waiting})
                    self._waiters.clear()
                else:
                    self._versions[key] = self._versions.get(key, 0) + 1
                    woken.extend(self._waiters.pop(key, ()))
        for loop, future in woken:
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # its loop has closed: nobody waits any more
                pass

    async def wait(self, keys: tuple[str, ...], seen: tuple[int, ...], timeout: float) -> bool:
        """Until one of ``keys`` moves past its version in ``seen`` (``versions``), or
        ``timeout`` seconds; whether one moved."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        waiter = (loop, future)
        with self._lock:
            if self._versions_of(keys) != seen:
                return True
            for key in keys:
                self._waiters.setdefault(key, set()).add(waiter)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            with self._lock:
                for key in keys:
                    waiting = self._waiters.get(key)
                    if waiting is not None:
                        waiting.discard(waiter)
                        if not waiting:
                            del self._waiters[key]


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
