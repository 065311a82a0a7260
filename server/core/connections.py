"""Connections that send nothing, or send a request slowly, are closed (issue 12).

One unauthenticated client held 2,000 idle or half-sent connections open indefinitely; at
20,500 the server ran out of file descriptors and /api/health stopped answering. uvicorn
closes a keep-alive connection idle between requests, but not one that never finishes its
request's headers. ``guarded_h11`` is uvicorn's h11 protocol with that deadline added:
a connection gets ``header_timeout_s`` to deliver a complete set of headers, for its
first request and for each one after. The body's deadline is ``server.limits.BodyLimit``'s.

Slow readers (issue 26, item 2): 20 sockets that pipelined requests and never read their
answers held a database session each while uvicorn waited to write, and the pool ran dry.
No route holds a session while its response is written (``Depends(get_db,
scope="function")``), h11 reads one pipelined request at a time (it stops reading while
an answer is owed), and one client address may hold at most ``max_per_client`` connections:
the next one is answered 503 and closed. Behind a proxy or a campus NAT every student
shares an address, so the limit is generous and ``MAX_CONNECTIONS_PER_CLIENT`` sets it.
"""

from __future__ import annotations

import asyncio
import resource
from collections import Counter

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

TOO_MANY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            b"Connection: close\r\nContent-Length: 50\r\n\r\n"
            b"too many connections from your address; try again\n")


def guarded_h11(header_timeout_s: float, max_per_client: int = 0) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a header deadline and, unless 0, a cap on connections
    per client address (counted on the event loop's thread: no lock needed)."""
    open_per_client: Counter[str] = Counter()

    class GuardedH11(H11Protocol):
        _header_deadline: asyncio.TimerHandle | None = None
        _address: str | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            self._address = str(peer[0]) if peer else "?"
            open_per_client[self._address] += 1
            if max_per_client and open_per_client[self._address] > max_per_client:
                transport.write(TOO_MANY)
                transport.close()  # connection_lost counts it back
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting:  # this request's headers are not complete yet
                if self._header_deadline is None:
                    self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self._address is not None:
                open_per_client[self._address] -= 1
                if open_per_client[self._address] <= 0:
                    del open_per_client[self._address]
                self._address = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_deadline = self.loop.call_later(header_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _expire(self) -> None:
            self._header_deadline = None
            if (self.cycle is None or self.cycle.response_complete) \
                    and not self.transport.is_closing():
                self.transport.close()  # nothing is owed to a client that never asked

    return GuardedH11


def raise_file_limit() -> int:
    """Use every file descriptor the hard limit allows: idle sockets are fds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def server_config(app, host: str, port: int, header_timeout_s: float,
                  max_per_client: int = 0) -> uvicorn.Config:
    """The embedded server's uvicorn settings, shared by ``python -m server`` and the tests."""
    return uvicorn.Config(app, host=host, port=port,
                          http=guarded_h11(header_timeout_s, max_per_client),
                          timeout_keep_alive=5, log_level="info",
                          # a page's progress stream stays open for minutes (api/events.py):
                          # on SIGTERM it is cut after 5 s, and the page opens a new one
                          timeout_graceful_shutdown=5)
