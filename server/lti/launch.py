"""A launch, from the LMS's signed id_token to a user here (and the activity's exercise).

PyLTI1p3 checks the state (against its cookie), the token's form, the nonce (once: see
adapter.py), the registration, the signature against the platform's JWKS, the expiry and
issue time (PyJWT), the deployment and the message's claims. This adds what it leaves out:
``aud`` must hold our client id, ``azp`` must be it where present (and is required when
``aud`` names others too), and ``exp``/``iat`` must be there at all (PyJWT checks them only
when they are). Every refusal is a ``Refused`` whose words the launch page shows.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field

from pylti1p3.exception import LtiException, OIDCException
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..auth.tokens import hash_token
from ..domain.lti_records import LtiIdentity, LtiLink, LtiPlatform
from ..domain.models import Role, User
from .registry import find

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
DL_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
# LIS context (course membership) roles that teach, and TeachingAssistant, a sub-role of
# Instructor. Institution and system roles do not count: Canvas sends its account's
# instructors theirs in every course, where they may be learners
TEACHING = ("Instructor", "TeachingAssistant", "Administrator")
CONTEXT_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership"


class Refused(Exception):
    """A launch this tool does not accept, in words for the page and the log."""


@dataclass
class LaunchFacts:
    platform: LtiPlatform
    message_type: str
    sub: str
    name: str
    roles: list[str]
    deployment_id: str
    context_id: str = ""
    context_title: str = ""
    resource_link_id: str = ""
    resource_title: str = ""
    exercise: str = ""  # the custom parameter deep linking gave the activity
    ags: dict | None = None
    nrps_url: str = ""
    deep_linking: dict = field(default_factory=dict)

    @property
    def teaches(self) -> bool:
        return teaching(self.roles)


def teaching(roles: list[str]) -> bool:
    """Instructor, TeachingAssistant or Administrator of this course: a context role
    (``…/membership#Instructor``, ``…/membership/Instructor#TeachingAssistant``, or a simple
    name, ``Instructor``, which LTI reads as a context role)."""
    for role in roles:
        if "://" in role and not role.startswith(CONTEXT_ROLE):
            continue  # an institution or system role
        if re.split(r"[#/]", role)[-1] in TEACHING:
            return True
    return False


def why(exc: Exception) -> str:
    """A refusal in a reader's words (PyLTI1p3's and PyJWT's, made plainer)."""
    text = str(exc)
    plain = {
        "Invalid Nonce": "this launch was used already (or its nonce is unknown): start it "
                         "again from your course",
        "State not found": "the sign-in state is missing or does not match: start again "
                           "from your course (the browser may have blocked the tool's cookie)",
        "Unable to find deployment": "this deployment of the tool is not registered here",
        "Registration not found.": "this LMS (issuer and client id) is not registered here",
        "Unable to find public key": "the token's signing key is not in the LMS's key set",
    }
    for start, words in plain.items():
        if text.startswith(start):
            return words
    if "Signature has expired" in text:
        return "the launch has expired: start it again from your course"
    if "not yet valid" in text:
        return ("the launch was issued in the future by this server's clock: one of the two "
                "clocks is off (start it again, and tell the operator)")
    if "Signature verification failed" in text or "Can't decode id_token" in text:
        return "the launch's signature does not verify against the LMS's keys"
    return text


def check_audience(body: dict, client_id: str) -> None:
    """``aud`` holds ``client_id`` (PyLTI1p3 takes the client id from ``aud``'s first, and
    its registration must exist), ``azp`` is it where there is one and where ``aud`` names
    others too, and the times are there."""
    aud = body.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    if client_id not in audiences:
        raise Refused("the launch is meant for another tool (aud)")
    azp = body.get("azp")
    if (len(audiences) > 1 or azp is not None) and azp != client_id:
        raise Refused("the launch names another authorized party (azp)")
    for claim in ("exp", "iat"):
        if not isinstance(body.get(claim), (int, float)):
            raise Refused(f"the launch has no {claim}")


def validated(launch, db: Session) -> LaunchFacts:
    """PyLTI1p3's checks, then ours, then the facts this tool uses."""
    try:
        body = launch.get_launch_data()  # validates on first use
    except (LtiException, OIDCException) as exc:
        raise Refused(why(exc)) from exc
    except (AttributeError, TypeError, ValueError, KeyError) as exc:  # JSON, but no claims
        raise Refused("the launch's token is not an LTI message") from exc
    client_id = launch.get_client_id()
    check_audience(body, client_id)
    platform = find(db, body["iss"], client_id)
    if platform is None:  # it was a moment ago: deleted between the two
        raise Refused("this LMS (issuer and client id) is not registered here")
    context = body.get(CLAIM + "context") or {}
    link = body.get(CLAIM + "resource_link") or {}
    custom = body.get(CLAIM + "custom") or {}
    name = body.get("name") or " ".join(
        p for p in (body.get("given_name"), body.get("family_name")) if p) or "LMS user"
    return LaunchFacts(
        platform=platform, message_type=body.get(CLAIM + "message_type", ""),
        sub=str(body.get("sub", "")), name=name[:128], roles=list(body.get(CLAIM + "roles") or []),
        deployment_id=body.get(CLAIM + "deployment_id", ""),
        context_id=str(context.get("id", "")), context_title=str(context.get("title", "")),
        resource_link_id=str(link.get("id", "")), resource_title=str(link.get("title", "")),
        exercise=str(custom.get("exercise", "")), ags=body.get(AGS_CLAIM),
        nrps_url=(body.get(NRPS_CLAIM) or {}).get("context_memberships_url", ""),
        deep_linking=body.get(DL_CLAIM) or {})


def username_for(platform: LtiPlatform, sub: str) -> str:
    """A username of the roster's alphabet, the same for one LMS user every time."""
    clean = re.sub(r"[^A-Za-z0-9_.@-]", "", sub)
    if clean == sub and len(sub) <= 48:
        return f"lti{platform.id}.{sub}"
    return f"lti{platform.id}.{hashlib.sha256(sub.encode()).hexdigest()[:32]}"


def user_for(db: Session, platform: LtiPlatform, sub: str, name: str,
             teaches: bool | None) -> User:
    """The user (issuer, sub) is here, made on first sight with the LMS's name; its role
    follows the LMS's (``None``: keep it, as a roster pull does not say). No API token is
    handed out: the student gets one on their page if they want curl."""
    if not sub:
        raise Refused("the launch names no user (sub)")
    identity = db.scalar(select(LtiIdentity).where(LtiIdentity.platform_id == platform.id,
                                                   LtiIdentity.sub == sub))
    if identity is not None:
        user = db.get(User, identity.user_id)
        if teaches is not None:
            user.role = Role.INSTRUCTOR if teaches else Role.STUDENT
        if name and name != "LMS user":
            user.display_name = name
        return user
    user = User(username=username_for(platform, sub), display_name=name,
                role=Role.INSTRUCTOR if teaches else Role.STUDENT,
                token_hash=hash_token(secrets.token_urlsafe(32)))  # known to no one
    db.add(user)
    db.flush()
    db.add(LtiIdentity(platform_id=platform.id, sub=sub, user_id=user.id))
    return user


def link_for(db: Session, facts: LaunchFacts, exercises) -> LtiLink | None:
    """The activity's link, with what this launch says of it (its line item may be new).
    None when it is tied to no exercise: deep linking was skipped for it."""
    link = db.scalar(select(LtiLink).where(LtiLink.platform_id == facts.platform.id,
                                           LtiLink.deployment_id == facts.deployment_id,
                                           LtiLink.resource_link_id == facts.resource_link_id))
    exercise = facts.exercise if facts.exercise in exercises else ""
    if link is None:
        if not exercise:
            return None
        link = LtiLink(platform_id=facts.platform.id, deployment_id=facts.deployment_id,
                       resource_link_id=facts.resource_link_id, exercise=exercise)
        db.add(link)
    elif exercise:
        link.exercise = exercise
    link.context_id, link.context_title = facts.context_id, facts.context_title[:255]
    link.title = facts.resource_title[:255]
    if facts.ags:
        link.ags = facts.ags
    if facts.nrps_url:
        link.nrps_url = facts.nrps_url
    db.flush()
    return link
