"""Every response says what its page may load, and nothing the app writes is kept in a cache
(issue 39).

**Content-Security-Policy**, on every response: scripts, styles, fonts, frames and
connections from this origin only, images from it or ``data:`` (the pages' empty favicon),
no plugins, no ``<base>``, forms posted only here, and no framing by anyone. No
``'unsafe-inline'`` and no ``'unsafe-eval'``: the pages load /static/style.css and
/static/*.js and hold no inline script, event handler or ``style`` attribute (the editor's
skeletons ride in a ``<script type="application/json">``, data that no browser runs, and
markdown's table alignment is a class: server/web/render.py). So a string that
slipped past escaping into a page (a display name, a source, a check's message) runs
nothing there. tests/test_security_headers.py opens every page in Chromium and asserts no
violation.

FastAPI's own API pages (``/docs``, its OAuth2 redirect, ``/redoc``, which the README
points to) are no page of ours: they load Swagger UI and ReDoc from cdn.jsdelivr.net and
style themselves inline, so they get a policy of their own, which allows that CDN and
inline styles but no inline script other than the page's own (its SHA-256, taken from the
page as it is sent), and still no framing.

**Cache-Control: no-store** on every response the app writes, unless the route set its own
(the leaderboard API's ``no-cache`` with its ETag, which 304s rely on; the events stream's
``no-store``); only /static/ (the same files for everyone) stays cacheable. Why not only
the pages that show a token or a source: nearly every page is someone's own. The roster
page shows tokens, the sign-in page takes one, the exercise page a student's parameters
and, after a refusal, their source; the submission, source, diff, /me, /admin/source and
similarity pages show sources; the API hands out tokens (POST /api/admin/students) and
sources (GET /api/admin/submissions/{id}/source), and downloads are sources and grades.
The rest carry the reader's name and their forms' CSRF token. A list of routes to protect
would leave the next page that shows a secret cacheable by default (on a shared lab
machine, the Back button after signing out); a list of what may be cached is empty but
for the static files. Nothing measurable is lost: every page is computed per request
anyway, and the one response worth revalidating (the leaderboard API) says so itself.

**X-Content-Type-Options: nosniff**: a downloaded source or a JSON body is never sniffed
into HTML or script. **Referrer-Policy: same-origin**: our own forms still send the
Referer the instructor's pages return to (and posts their Origin); another site is told
nothing, not even a submission's id in a path.

A header a route set itself is kept. Pure ASGI: no thread, no database; it sees only the
response's start, but on the FastAPI pages, whose body it reads to hash their script.
"""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))

# FastAPI's API pages at its default paths (docs_url, swagger_ui_oauth2_redirect_url,
# redoc_url), with the hosts their HTML names (fastapi/openapi/docs.py)
API_PAGES = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})
CDN = "https://cdn.jsdelivr.net"
_API_PAGE_POLICY = "; ".join((
    "default-src 'self'",
    f"script-src 'self' {CDN}{{scripts}}",
    f"style-src 'self' {CDN} https://fonts.googleapis.com 'unsafe-inline'",
    "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly",
    "font-src 'self' https://fonts.gstatic.com",
    "worker-src 'self' blob:",  # ReDoc searches in a worker it makes from a blob
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))
_INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\ssrc=)[^>]*>(.*?)</script>", re.S | re.I)

NO_STORE = "no-store"
CACHEABLE_PREFIX = "/static/"  # the same stylesheet and scripts for everyone


def api_page_policy(body: bytes) -> str:
    """The policy of one of FastAPI's API pages: its inline scripts by their SHA-256."""
    hashes = sorted({base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()
                     for m in _INLINE_SCRIPT.finditer(body)})
    return _API_PAGE_POLICY.format(scripts="".join(f" 'sha256-{h}'" for h in hashes))


class SecurityHeaders:
    """Pure ASGI middleware: the headers above on every HTTP response."""

    def __init__(self, app: ASGIApp, api_pages: frozenset[str] = API_PAGES):
        self.app, self.api_pages = app, api_pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        cacheable = path.startswith(CACHEABLE_PREFIX)
        if path in self.api_pages:
            await self.app(scope, receive, _hashing(send, cacheable))
            return

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                _stamp(message, POLICY, cacheable)
            await send(message)

        await self.app(scope, receive, stamped)


def _stamp(start: Message, policy: str, cacheable: bool) -> None:
    headers = MutableHeaders(scope=start)
    headers.setdefault("content-security-policy", policy)
    headers.setdefault("x-content-type-options", "nosniff")
    headers.setdefault("referrer-policy", "same-origin")
    if not cacheable:
        headers.setdefault("cache-control", NO_STORE)


def _hashing(send: Send, cacheable: bool) -> Send:
    """A send that holds an API page's start until its body is whole (a few kB), to hash
    the body's inline scripts into the start's policy."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def held(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        _stamp(start, api_page_policy(body), cacheable)
        await send(start)
        await send({"type": "http.response.body", "body": body})

    return held
