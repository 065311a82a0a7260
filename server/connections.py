"""Connections that send nothing, or send a request slowly, are closed (issue 12).

One unauthenticated client held 2,000 idle or half-sent connections open indefinitely; at
20,500 the server ran out of file descriptors and /api/health stopped answering. uvicorn
closes a keep-alive connection idle between requests, but not one that never finishes its
request's headers. ``guarded_h11`` is uvicorn's h11 protocol with that deadline added:
a connection gets ``header_timeout_s`` to deliver a complete set of headers, for its
first request and for each one after. The body's deadline is ``server.limits.BodyLimit``'s.
"""

from __future__ import annotations

import asyncio
import resource

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol


def guarded_h11(header_timeout_s: float) -> type[H11Protocol]:
    class GuardedH11(H11Protocol):
        _header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
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


def server_config(app, host: str, port: int, header_timeout_s: float) -> uvicorn.Config:
    """The embedded server's uvicorn settings, shared by ``python -m server`` and the tests."""
    return uvicorn.Config(app, host=host, port=port, http=guarded_h11(header_timeout_s),
                          timeout_keep_alive=5, log_level="info")
