"""The platforms registered (an LMS's issuer, the client id it gave us, its deployments and
URLs), and PyLTI1p3's view of them: a ToolConf read from the database, with our keys."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pylti1p3.deployment import Deployment
from pylti1p3.registration import Registration
from pylti1p3.tool_config.abstract import ToolConfAbstract
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core.settings import Settings
from ..domain.lti_records import LtiPlatform
from . import keys


class Unregistrable(ValueError):
    """A registration's field is wrong; its words say which."""


@dataclass(frozen=True)
class PlatformFields:
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_login_url: str
    auth_token_url: str
    key_set_url: str
    frame_origins: tuple[str, ...] = ()


HOST = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an http(s) URL; Unregistrable for anything else (it goes
    into a Content-Security-Policy header: nothing but a host may)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not HOST.fullmatch(parts.netloc or ""):
        raise Unregistrable(f"{url!r} is no http(s) address")
    return f"{parts.scheme}://{parts.netloc}"


def _url(name: str, value: str) -> str:
    value = value.strip()
    try:
        origin_of(value)
    except Unregistrable:
        raise Unregistrable(f"{name} must be a full http(s) URL, not {value!r}") from None
    return value


def register(db: Session, fields: PlatformFields) -> LtiPlatform:
    """Add a platform, or update the one with this issuer and client id. The caller commits."""
    issuer, client_id = fields.issuer.strip(), fields.client_id.strip()
    if not issuer or not client_id:
        raise Unregistrable("the issuer and the client id are both needed")
    deployments = [d.strip() for d in fields.deployment_ids if d.strip()]
    if not deployments:
        raise Unregistrable("at least one deployment id is needed (the LMS shows it once "
                            "the tool is installed)")
    frames = [origin_of(_url("a frame origin", o)) for o in fields.frame_origins if o.strip()]
    platform = db.scalar(select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                   LtiPlatform.client_id == client_id))
    if platform is None:
        platform = LtiPlatform(issuer=issuer, client_id=client_id)
        db.add(platform)
    platform.deployment_ids = sorted(set(deployments))
    platform.auth_login_url = _url("the auth (login) URL", fields.auth_login_url)
    platform.auth_token_url = _url("the token URL", fields.auth_token_url)
    platform.key_set_url = _url("the keyset (JWKS) URL", fields.key_set_url)
    platform.frame_origins = frames or ([origin_of(issuer)] if "://" in issuer else [])
    if not platform.frame_origins:
        raise Unregistrable("the issuer is no web address: give the LMS's address as a frame "
                            "origin")
    return platform


def platforms(db: Session) -> list[LtiPlatform]:
    return list(db.scalars(select(LtiPlatform).order_by(LtiPlatform.id)))


def find(db: Session, issuer: str, client_id: str | None) -> LtiPlatform | None:
    """The registration of ``issuer`` with ``client_id``; without one (a login request may
    name none), the issuer's only registration."""
    rows = list(db.scalars(select(LtiPlatform).where(LtiPlatform.issuer == issuer)))
    if client_id:
        return next((p for p in rows if p.client_id == client_id), None)
    return rows[0] if len(rows) == 1 else None


def registration_of(platform: LtiPlatform, settings: Settings) -> Registration:
    """PyLTI1p3's registration, signing with our newest key."""
    key = keys.current(settings)
    if key is None:
        raise Unregistrable("the tool has no key yet: run `python -m server lti keys rotate`")
    return (Registration().set_issuer(platform.issuer).set_client_id(platform.client_id)
            .set_auth_login_url(platform.auth_login_url)
            .set_auth_token_url(platform.auth_token_url)
            .set_key_set_url(platform.key_set_url)
            .set_tool_private_key(key.private_pem).set_tool_public_key(key.public_pem))


class DatabaseToolConf(ToolConfAbstract):
    """Registrations as PyLTI1p3 asks for them, from the database (many client ids may
    share an issuer)."""

    def __init__(self, db: Session, settings: Settings):
        super().__init__()
        self.db, self.settings = db, settings

    def check_iss_has_one_client(self, iss: str) -> bool:
        return False

    def check_iss_has_many_clients(self, iss: str) -> bool:
        return True

    def find_registration_by_issuer(self, iss, *args, **kwargs):
        return self.find_registration_by_params(iss, None)

    def find_registration_by_params(self, iss, client_id, *args, **kwargs):
        platform = find(self.db, iss, client_id)
        return registration_of(platform, self.settings) if platform else None

    def find_deployment(self, iss, deployment_id):
        return self.find_deployment_by_params(iss, deployment_id, None)

    def find_deployment_by_params(self, iss, deployment_id, client_id, *args, **kwargs):
        platform = find(self.db, iss, client_id)
        if platform is None or deployment_id not in platform.deployment_ids:
            return None
        return Deployment().set_deployment_id(deployment_id)

    def get_jwks(self, iss=None, client_id=None, **kwargs):
        return keys.jwks(self.settings)
