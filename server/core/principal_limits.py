"""Each principal has a bounded number of requests in flight and of streams open (issue 39).

One student with a valid token sent 200 ``GET /api/submissions/1`` at once: the threadpool
and the database pool were theirs until the burst drained, other students waited 20 s, and
the grading slot could not store a result. Now every HTTP request is counted, before it
reaches the application, against its principal; past the principal's budget it is answered
429 with ``Retry-After`` at once, from here: no thread, no database connection, no body read.

Who the principal is, from the request alone (no database):

- **a credential this process has seen accepted**: the bearer token or the browser's session
  cookie, by a hash of it. Its budget is its role's (a student's, or an instructor's,
  larger): ``remember`` learns the role when the application has authenticated it.
- **otherwise the client address**: a request with no credential, or one whose credential
  was never accepted here (a forged or random token must not buy a fresh budget per
  guess). The address's budget is larger, since a campus NAT is a whole class.
- **a grading worker's call** (``/internal/``) counts against its address under the workers'
  own budget: a class's burst never holds up a result being stored.

Streams (``…/events``) have budgets of their own, apart from requests: a stream lasts
minutes, and must not eat the requests its page makes.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from http.cookies import SimpleCookie

from starlette.types import ASGIApp, Receive, Scope, Send

STUDENT, INSTRUCTOR, ADDRESS, WORKER = "student", "instructor", "address", "worker"
# where the application tells which role a request authenticated as (request.state)
ROLE_STATE = "principal_role"
REMEMBERED = 50_000  # accepted credentials kept; past it the least recent is forgotten


@dataclass(frozen=True)
class Budget:
    requests: int  # in flight at once
    streams: int  # open at once


class PrincipalLimits:
    """Pure ASGI middleware: count each HTTP request against its principal, refuse past
    its budget. ``budgets``: by kind (``STUDENT``, ``INSTRUCTOR``, ``ADDRESS``, ``WORKER``);
    ``cookie``: the name of the browser's session cookie."""

    def __init__(self, app: ASGIApp, budgets: dict[str, Budget], cookie: str,
                 stream_suffix: str = "/events", worker_prefix: str = "/internal/"):
        self.app, self.budgets, self.cookie = app, budgets, cookie
        self.stream_suffix, self.worker_prefix = stream_suffix, worker_prefix
        self._lock = threading.Lock()  # remember() runs on the application's threads
        self._roles: OrderedDict[str, str] = OrderedDict()  # credential hash -> role
        self._open: dict[tuple[str, bool], int] = {}  # (principal, stream?) -> in flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        credential = self._credential(scope)
        principal, kind = self._principal(scope, credential)
        stream = scope["path"].endswith(self.stream_suffix)
        budget = self.budgets[kind]
        limit = budget.streams if stream else budget.requests
        key = (principal, stream)
        with self._lock:
            if self._open.get(key, 0) >= limit:
                refused = True
            else:
                refused = False
                self._open[key] = self._open.get(key, 0) + 1
        if refused:
            await _too_many(scope, send, limit, stream)
            return
        scope.setdefault("state", {})
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                left = self._open[key] - 1
                if left:
                    self._open[key] = left
                else:
                    del self._open[key]
            role = scope["state"].get(ROLE_STATE)
            if credential and role in (STUDENT, INSTRUCTOR):
                self.remember(credential, role)

    def remember(self, credential: str, role: str) -> None:
        """The application accepted this credential as ``role``: it has its own budget."""
        with self._lock:
            self._roles[credential] = role
            self._roles.move_to_end(credential)
            while len(self._roles) > REMEMBERED:
                self._roles.popitem(last=False)

    def in_flight(self) -> int:
        """Requests and streams open now, all principals together (for tests and metrics)."""
        with self._lock:
            return sum(self._open.values())

    def _principal(self, scope: Scope, credential: str | None) -> tuple[str, str]:
        address = _address(scope)
        if scope["path"].startswith(self.worker_prefix):
            return f"worker:{address}", WORKER
        if credential is not None:
            with self._lock:
                role = self._roles.get(credential)
            if role is not None:
                return f"credential:{credential}", role
        return f"address:{address}", ADDRESS

    def _credential(self, scope: Scope) -> str | None:
        """A hash of the bearer token, else of the session cookie; None without either."""
        authorization = cookie_header = b""
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                authorization = value
            elif name == b"cookie":
                cookie_header = value
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return _digest("bearer", token.strip())
        if cookie_header:
            cookies = SimpleCookie()
            try:
                cookies.load(cookie_header.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed header is the client's; no credential
                return None
            if self.cookie in cookies and cookies[self.cookie].value:
                return _digest("session", cookies[self.cookie].value)
        return None


def _digest(kind: str, secret: str) -> str:
    return hashlib.sha256(f"{kind}\x00{secret}".encode("utf-8", "replace")).hexdigest()[:32]


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "?"


async def _too_many(scope: Scope, send: Send, limit: int, stream: bool) -> None:
    what = f"{limit} progress streams open" if stream else f"{limit} requests in flight"
    detail = (f"too many at once: you already have {what}; wait for them to finish "
              "(Retry-After says when to try again)")
    if scope["path"].startswith("/api") or stream:
        body, kind = json.dumps({"detail": detail}).encode(), b"application/json"
    else:
        body = (detail[0].upper() + detail[1:] + ".\n").encode()
        kind = b"text/plain; charset=utf-8"
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", kind), (b"retry-after", b"1"),
                            (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})
