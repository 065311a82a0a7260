"""A request body larger than the server takes is refused before it is read, and one sent
too slowly is cut off.

Without this a 50 MB body was read whole before the endpoint said 413, also on /signin,
before any token was looked at (issue 12). The declared Content-Length is checked first;
a chunked body is counted as it arrives and cut off at the limit; a body not complete
within ``body_timeout_s`` gets 408.
"""

from __future__ import annotations

import asyncio
import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send


# BaseException, not Exception: the framework turns any Exception raised while it reads a
# body into its own 400, and these must reach this middleware to become 413 and 408
class BodyTooLarge(BaseException):
    pass


class BodyTooSlow(BaseException):
    pass


class BodyLimit:
    """Pure ASGI middleware: 413 with {"detail"} for a body over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 30.0):
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def _refuse(self, send: Send, status: int = 413) -> None:
        detail = (f"the request body is over {self.max_bytes} bytes" if status == 413 else
                  f"the request body did not arrive within {self.timeout_s:g} s")
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        try:
            if declared is not None and int(declared) > self.max_bytes:
                await self._refuse(send)
                return
        except ValueError:
            await self._refuse(send)
            return
        seen = 0
        started = False
        body_done = False
        deadline = time.monotonic() + self.timeout_s

        async def counted_receive() -> Message:
            nonlocal seen, body_done
            if body_done:  # after the body: waiting for a disconnect is no body's time
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise BodyTooSlow() from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge()
                body_done = not message.get("more_body", False)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)
        except BodyTooSlow:
            if not started:
                await self._refuse(send, 408)
