"""A course's members from the LMS (LTI NRPS), instead of a CSV: each active member is a
user here (as their first launch would make them), and each learner's score on the
course's activities is followed from now on, so that grades flow before anyone launches."""

from __future__ import annotations

from dataclasses import dataclass

from pylti1p3.exception import LtiException
from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector
from requests import RequestException
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core.settings import Settings
from ..domain.lti_records import LtiLink, LtiPlatform
from .adapter import TimedSession
from .grades import follow
from .launch import teaching, user_for
from .registry import registration_of


@dataclass(frozen=True)
class Pulled:
    students: int
    instructors: int
    skipped: int  # inactive members, or members the LMS gave no id


class RosterUnavailable(Exception):
    """The LMS did not give the roster; the words say why."""


def pull(db: Session, settings: Settings, platform: LtiPlatform, context_id: str) -> Pulled:
    """Every active member of the course ``context_id``; the caller commits."""
    links = list(db.scalars(select(LtiLink).where(LtiLink.platform_id == platform.id,
                                                  LtiLink.context_id == context_id)))
    url = next((link.nrps_url for link in links if link.nrps_url), "")
    if not url:
        raise RosterUnavailable("no launch from this course offered its roster (turn on the "
                                "LMS's Names and Role Provisioning service for the tool)")
    service = NamesRolesProvisioningService(
        ServiceConnector(registration_of(platform, settings), TimedSession()),
        {"context_memberships_url": url, "service_versions": ["2.0"]})
    try:
        members = service.get_members()
    except (LtiException, RequestException) as exc:
        raise RosterUnavailable(f"the LMS did not give the roster: {str(exc)[:300]}") from exc
    students = instructors = skipped = 0
    for member in members:
        sub = str(member.get("user_id") or "")
        if not sub or member.get("status", "Active") != "Active":
            skipped += 1
            continue
        teaches = teaching(list(member.get("roles") or []))
        name = member.get("name") or " ".join(
            p for p in (member.get("given_name"), member.get("family_name")) if p) or "LMS user"
        user = user_for(db, platform, sub, name[:128], teaches)
        if teaches:
            instructors += 1
            continue
        students += 1
        for link in links:
            follow(db, link, user.id, sub, settings.late_policy)
    return Pulled(students, instructors, skipped)
