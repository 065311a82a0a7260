"""PyLTI1p3 fitted to Starlette and to our database (it ships Flask and Django adapters).

- The login's state lives in a cookie the launch reads back. The launch happens inside the
  LMS's iframe, a third party's frame, where browsers drop unpartitioned cookies: the
  cookie is ``SameSite=None; Secure; Partitioned`` (CHIPS), which they keep per embedding
  site even with third-party cookies blocked.
- Its state, nonces and launch data live in the database (``lti_kv``), with an expiry,
  not in a server-side session we do not have.
- A nonce serves once: PyLTI1p3's own check only asks whether the nonce was issued, so a
  launch posted twice passed twice; ours deletes it as it checks it, and only after the
  signature verified (PyLTI1p3 checks the nonce first: an unsigned token would spend it).
- The signature's time claims allow LEEWAY_S of clock difference (PyJWT allows none: an LMS
  whose clock ran one second ahead had its launches refused), and the LMS's key set is
  fetched with a timeout and kept KEY_SET_CACHE_S.
- What the login keeps (its state, its nonce) lives LOGIN_LIFETIME_S, not PyLTI1p3's day:
  anyone may start a login, and each leaves rows behind.
"""

from __future__ import annotations

import typing as t
from datetime import timedelta

import jwt
import requests
from pylti1p3.cookie import CookieService
from pylti1p3.exception import LtiException
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.request import Request
from pylti1p3.session import SessionService
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from starlette.responses import RedirectResponse, Response

from ..core.clock import utcnow
from ..domain.lti_records import LtiKv

DEFAULT_LIFETIME_S = 86400
LOGIN_LIFETIME_S = 600  # from the LMS's login request to its launch: seconds, in practice
LEEWAY_S = 60
KEY_SET_CACHE_S = 300  # an LMS's new key is used by its launches within this
HTTP_TIMEOUT_S = 15


class TimedSession(requests.Session):
    """PyLTI1p3 sets no timeout: an LMS that never answers would hold a thread forever."""

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", HTTP_TIMEOUT_S)
        return super().request(*args, **kwargs)


class LtiRequest(Request):
    """A request's form or query parameters and cookies, as PyLTI1p3 reads them."""

    def __init__(self, params: t.Mapping[str, str], cookies: t.Mapping[str, str],
                 secure: bool):
        super().__init__()
        self._params, self._cookies, self._secure = dict(params), dict(cookies), secure

    @property
    def session(self):  # never used: the data storage below replaces the session
        return {}

    def get_param(self, key: str):
        return self._params.get(key)

    def get_cookie(self, key: str):
        return self._cookies.get(key)

    def is_secure(self) -> bool:
        return self._secure


def cookie_header(name: str, value: str, max_age: int | None, secure: bool) -> str:
    """A Set-Cookie line for a cookie that must live in a third party's frame. Over plain
    http (a developer's machine that is no localhost) no browser keeps a Secure cookie:
    there it is an ordinary Lax one, and a framed launch cannot work."""
    parts = [f"{name}={value}", "Path=/", "HttpOnly"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    parts += ["SameSite=None", "Secure", "Partitioned"] if secure else ["SameSite=Lax"]
    return "; ".join(parts)


class LtiCookies(CookieService):
    def __init__(self, request: LtiRequest):
        self._request = request
        self._to_set: dict[str, tuple[str, int | None]] = {}

    def _get_key(self, key: str) -> str:
        return f"{self._cookie_prefix}-{key}"

    def get_cookie(self, name: str):
        return self._request.get_cookie(self._get_key(name))

    def set_cookie(self, name: str, value, exp: int | None = 3600):
        self._to_set[self._get_key(name)] = (str(value), exp)

    def apply(self, response: Response) -> Response:
        for name, (value, exp) in self._to_set.items():
            response.headers.append("set-cookie", cookie_header(name, value, exp,
                                                                self._request.is_secure()))
        return response


class LtiRedirect(Redirect):
    def __init__(self, location: str, cookies: LtiCookies):
        super().__init__()
        self._location, self._cookies = location, cookies

    def do_redirect(self):
        return self._cookies.apply(RedirectResponse(self._location, status_code=302))

    do_js_redirect = do_redirect  # no inline script on our pages (their CSP allows none)

    def set_redirect_url(self, location: str):
        self._location = location

    def get_redirect_url(self) -> str:
        return self._location


class DatabaseStorage(LaunchDataStorage):
    """Keys with an expiry in ``lti_kv``; no session id (so no cookie of its own)."""

    _session_cookie_name = None

    def __init__(self, db: Session):
        super().__init__()
        self.db = db

    def can_set_keys_expiration(self) -> bool:
        return True

    def _live(self, key: str):
        return select(LtiKv).where(LtiKv.key == self._prepare_key(key),
                                   LtiKv.expires_at > utcnow())

    def get_value(self, key: str):
        row = self.db.scalar(self._live(key))
        return row.value if row else None

    def set_value(self, key: str, value, exp: int | None = None) -> None:
        name = self._prepare_key(key)
        row = self.db.get(LtiKv, name) or LtiKv(key=name)
        row.value = value
        row.expires_at = utcnow() + timedelta(seconds=exp or DEFAULT_LIFETIME_S)
        self.db.add(row)
        self.db.flush()

    def check_value(self, key: str) -> bool:
        return self.db.scalar(self._live(key)) is not None

    def consume(self, key: str) -> bool:
        """Delete the key if it is live; whether it was (so only one caller gets True)."""
        gone = self.db.execute(delete(LtiKv).where(LtiKv.key == self._prepare_key(key),
                                                   LtiKv.expires_at > utcnow()))
        return gone.rowcount == 1


class OnceNonces(SessionService):
    """PyLTI1p3's session service on our storage, a nonce good for one launch."""

    def __init__(self, request: LtiRequest, storage: DatabaseStorage):
        super().__init__(request)
        self.set_data_storage(storage)

    def check_nonce(self, nonce: str) -> bool:
        return self.data_storage.consume(self._get_key("nonce", nonce))


def forget_expired(db: Session) -> None:
    db.execute(delete(LtiKv).where(LtiKv.expires_at <= utcnow()))


class Login(OIDCLogin):
    def __init__(self, request: LtiRequest, tool_conf, db: Session):
        storage = DatabaseStorage(db)
        super().__init__(request, tool_conf, OnceNonces(request, storage), LtiCookies(request),
                         storage)
        self.set_launch_data_lifetime(LOGIN_LIFETIME_S)

    def get_redirect(self, url: str):
        return LtiRedirect(url, self._cookie_service)

    def get_response(self, html: str):
        return Response(html, media_type="text/html")


class Launch(MessageLaunch):
    def __init__(self, request: LtiRequest, tool_conf, db: Session):
        storage = DatabaseStorage(db)
        super().__init__(request, tool_conf, OnceNonces(request, storage), LtiCookies(request),
                         storage, TimedSession())
        self.set_launch_data_lifetime(LOGIN_LIFETIME_S)
        self.set_public_key_caching(storage, KEY_SET_CACHE_S)

    def _get_request_param(self, key: str):
        return self._request.get_param(key)

    def validate(self):
        """PyLTI1p3's checks, the signature before the nonce; the launch itself is not kept
        (nothing here restores a launch later)."""
        if self._restored:
            raise LtiException("Can't validate restored launch")
        self._validated = True
        try:
            return (self.validate_state().validate_jwt_format().validate_registration()
                    .validate_jwt_signature().validate_nonce().validate_deployment()
                    .validate_message())
        except Exception:
            self._validated = False
            raise

    def validate_jwt_signature(self):
        public_key, algorithm = self.get_public_key()
        try:
            jwt.decode(self._get_id_token(), public_key, algorithms=[algorithm],
                       options={"verify_aud": False, "require": ["exp", "iat"]},
                       leeway=LEEWAY_S)
        except jwt.InvalidTokenError as exc:
            raise LtiException(f"Can't decode id_token: {exc}") from exc
        return self
