"""Deep linking: an instructor adding the tool to a course picks the exercise, and the LMS
gets back a signed resource link that carries it (a custom parameter every launch of the
activity returns) and a line item of SCORE_MAXIMUM points, its gradebook column.

Between the LMS's request and the pick, the request's settings wait in ``lti_kv`` under a
random key the picker's form holds: good PICK_S, and once (no cookie lives in the frame).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from pylti1p3.deep_link import DeepLink
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.lineitem import LineItem
from sqlalchemy.orm import Session

from ..core.settings import Settings
from ..domain.lti_records import LtiPlatform
from . import once
from .grades import SCORE_MAXIMUM
from .launch import LaunchFacts, Refused
from .registry import Unregistrable, origin_of, registration_of

PICK_S = 3600  # an instructor may read the statements before choosing
_PREFIX = "pick-"


@dataclass(frozen=True)
class Answer:
    return_url: str
    jwt: str
    frame_origins: list[str]


def remember_request(db: Session, facts: LaunchFacts) -> str:
    """Keep the request's settings for the pick; the key the picker's form carries."""
    try:
        origin_of(facts.deep_linking.get("deep_link_return_url") or "")
    except Unregistrable:
        raise Refused("the LMS's deep-linking request names no return address") from None
    key = secrets.token_urlsafe(32)
    once.put(db, _PREFIX + key, {"platform_id": facts.platform.id,
                                 "deployment_id": facts.deployment_id,
                                 "settings": facts.deep_linking}, PICK_S)
    return key


def answer(db: Session, settings: Settings, key: str, exercise: str, title: str,
           launch_url: str) -> Answer:
    """The signed answer to a remembered request (spent here), for ``exercise``."""
    request = once.take(db, _PREFIX + (key or ""))
    if request is None:
        raise Refused("this choice was made already, or it waited too long: add the "
                      "activity again from your course")
    platform = db.get(LtiPlatform, request["platform_id"])
    if platform is None:
        raise Refused("this LMS is no longer registered here")
    link_settings = request["settings"]
    resource = (DeepLinkResource().set_url(launch_url).set_title(title)
                .set_custom_params({"exercise": exercise})
                .set_lineitem(LineItem().set_score_maximum(SCORE_MAXIMUM).set_label(title)
                              .set_tag(exercise)))
    jwt = DeepLink(registration_of(platform, settings), request["deployment_id"],
                   link_settings).get_response_jwt([resource])
    return Answer(link_settings["deep_link_return_url"], jwt, platform.frame_origins)
