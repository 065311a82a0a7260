"""Forms carry a token, and a post from another origin is refused (issue 12, item 3).

SameSite=Lax cookies alone did not hold: a page on another port of the same host is the
same *site*, so it could post a flag change as the instructor and a submission as a
student. Now every state-changing form holds a hidden ``csrf`` field: an HMAC, under the
server's secret, of a random seed kept in the browser's own HttpOnly cookie and of the
browser's session cookie. A page of another origin can neither read those cookies nor our
pages, so it cannot know the token; and since cookies do not keep to a port, it could plant
a seed whose token it learnt on a visit of its own, which the session binding refuses
(issue 26, item 3). Every post must also come from our own origin where the browser says
(``Origin``); ``null`` is no origin of ours.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import HTTPException, Request, Response

from ..core.strength import same_secret
from .sessions import COOKIE as SESSION_COOKIE

SEED_COOKIE = "autograder_csrf"
FIELD = "csrf"


def _secret(request: Request) -> bytes:
    state = request.app.state
    if not getattr(state, "csrf_secret", None):
        # a server restart invalidates the forms on screen: they are simply reloaded
        state.csrf_secret = secrets.token_bytes(32)
    return state.csrf_secret


def _token_for(request: Request, seed: str) -> str:
    # bound to the browser's session too (issue 26, item 3): cookies do not keep to a port,
    # so a page on another port of the host can plant a seed whose token it learnt from a
    # visit of its own; that token was made for no session, or for the attacker's
    session = request.cookies.get(SESSION_COOKIE, "")
    return hmac.new(_secret(request), f"{seed}\x00{session}".encode("utf-8", "replace"),
                    hashlib.sha256).hexdigest()[:40]


def form_token(request: Request) -> tuple[str, str | None]:
    """The token for this browser's forms, and a new seed to set if it had none."""
    seed = request.cookies.get(SEED_COOKIE)
    new_seed = None
    if not seed:
        seed = new_seed = secrets.token_urlsafe(24)
    return _token_for(request, seed), new_seed


def set_seed(response: Response, request: Request, seed: str | None) -> None:
    if seed:
        response.set_cookie(SEED_COOKIE, seed, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")


def same_origin(request: Request) -> bool:
    """No Origin header (an old browser, curl) passes; a foreign one does not, and neither
    does ``null`` (a sandboxed frame, a data: page, or a page that hid its referrer: it
    matched an unset PUBLIC_URL's empty origin and passed)."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    theirs = urlsplit(origin)
    if not theirs.scheme or not theirs.netloc:
        return False
    ours = urlsplit(str(request.base_url))
    allowed = {(ours.scheme, ours.netloc)}
    public_url = request.app.state.settings.public_url
    if public_url:
        public = urlsplit(public_url)
        allowed.add((public.scheme, public.netloc))
    return (theirs.scheme, theirs.netloc) in allowed


async def check_form(request: Request) -> None:
    """A FastAPI dependency for every page that changes something."""
    if not same_origin(request):
        raise HTTPException(403, "this form was posted from another site")
    seed = request.cookies.get(SEED_COOKIE)
    sent = (await request.form()).get(FIELD)
    if not seed or not isinstance(sent, str) or not same_secret(sent, _token_for(request, seed)):
        raise HTTPException(403, "this form is out of date or not ours: reload the page and "
                                 "send it again")
