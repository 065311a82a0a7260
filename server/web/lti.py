"""LTI 1.3's doors (issue 40): the OIDC login, the launch, deep linking's answer, the
one-time entry from the LMS's frame, and the tool's public keys. The protocol and what is
kept are server/lti/; these only read requests and write pages.

The pages shown inside the LMS's frame may be framed by that LMS's own address (their
Content-Security-Policy's frame-ancestors: the registration's frame origins), and no page
of ours can be framed by anyone else. No session lives in the frame: see server/lti/entry.py.
"""

from __future__ import annotations

import logging

import jwt

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool
from pylti1p3.exception import LtiException, OIDCException
from sqlalchemy.orm import Session

from ..auth import csrf
from ..auth.deps import get_db
from ..auth.sessions import session_lifetime, set_session_cookie, start_session
from ..core.security_headers import POLICY
from ..domain.lti_records import LtiPlatform
from ..domain.models import User
from ..lti import deep_linking, keys
from ..lti.adapter import Launch, Login, LtiRequest, forget_expired
from ..lti.entry import new_entry, peek_entry, use_entry
from ..lti.grades import follow
from ..lti.launch import LaunchFacts, Refused, link_for, user_for, validated
from ..lti.registry import DatabaseToolConf, find, origin_of
from .guards import own_path
from .render import render, templates

log = logging.getLogger("server.lti")
router = APIRouter(include_in_schema=False)

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # browsers keep Secure cookies there on http
RESOURCE_LINK = "LtiResourceLinkRequest"
DEEP_LINKING = "LtiDeepLinkingRequest"


def tool_base(request: Request) -> str:
    public = request.app.state.settings.public_url
    return (public or str(request.base_url)).rstrip("/")


def _secure(request: Request) -> bool:
    """Whether the browser reached us where it keeps Secure cookies."""
    return tool_base(request).startswith("https://") or request.url.hostname in LOCAL_HOSTS


def framed_policy(frame_origins: list[str], form_targets: tuple[str, ...] = ()) -> str:
    """Our policy, but framed by the LMS (and, for deep linking's answer, posting to it)."""
    parts = []
    for directive in POLICY.split("; "):
        if directive.startswith("frame-ancestors"):
            directive = "frame-ancestors " + (" ".join(frame_origins) or "'none'")
        elif directive.startswith("form-action") and form_targets:
            directive = "form-action 'self' " + " ".join(form_targets)
        parts.append(directive)
    return "; ".join(parts)


def _page(request: Request, frame_origins: list[str], status_code: int = 200,
          **context) -> HTMLResponse:
    response = templates.TemplateResponse(request, "lti_frame.html", context,
                                          status_code=status_code)
    response.headers["content-security-policy"] = framed_policy(frame_origins)
    return response


def claimed_platform(db: Session, params: dict[str, str]) -> LtiPlatform | None:
    """The registration a request names (a login's ``iss``/``client_id``, a launch token's
    ``iss``/``aud``, unverified): only to let that LMS frame the page that refuses it."""
    iss, client_id = params.get("iss", ""), params.get("client_id")
    if params.get("id_token"):
        try:
            body = jwt.decode(params["id_token"], options={"verify_signature": False})
            aud = body.get("aud")
            iss, client_id = str(body.get("iss", "")), aud[0] if isinstance(aud, list) else aud
        except (jwt.InvalidTokenError, AttributeError, IndexError, TypeError):
            return None
    return find(db, iss, client_id) if iss else None


def _refused(request: Request, reason: str, platform: LtiPlatform | None = None,
             status_code: int = 400) -> HTMLResponse:
    log.warning("LTI launch refused from %s: %s", request.client.host if request.client else "?",
                reason)
    return _page(request, platform.frame_origins if platform else [], status_code,
                 heading="This launch was refused", refused=reason[0].upper() + reason[1:] + ".")


async def _params(request: Request) -> dict[str, str]:
    params = dict(request.query_params)
    if request.method == "POST":
        params.update({k: v for k, v in (await request.form()).items() if isinstance(v, str)})
    return params


def _lti_request(request: Request, params: dict[str, str]) -> LtiRequest:
    return LtiRequest(params, request.cookies, _secure(request))


@router.api_route("/lti/login", methods=["GET", "POST"])
async def login(request: Request):
    """OpenID Connect third-party initiated login: to the LMS's auth URL, with a state
    (its cookie partitioned, for the frame) and a nonce."""
    return await run_in_threadpool(_login, request, await _params(request))


def _login(request: Request, params: dict[str, str]):
    with request.app.state.sessionmaker() as db:
        try:
            conf = DatabaseToolConf(db, request.app.state.settings)
            response = Login(_lti_request(request, params), conf, db).redirect(
                tool_base(request) + "/lti/launch")
            forget_expired(db)
            db.commit()
            return response
        except (OIDCException, LtiException, ValueError) as exc:
            return _refused(request, f"the LMS's sign-in request was not accepted: {exc}",
                            claimed_platform(db, params))


@router.post("/lti/launch")
async def launch(request: Request):
    """The LMS's signed launch (a resource link, or deep linking's request)."""
    # the launch reads the database and fetches the LMS's keys: on a thread, as sync routes
    return await run_in_threadpool(_launch, request, await _params(request))


def _launch(request: Request, params: dict[str, str]):
    settings, exercises = request.app.state.settings, request.app.state.exercises
    with request.app.state.sessionmaker() as db:
        conf = DatabaseToolConf(db, settings)
        message = Launch(_lti_request(request, params), conf, db)
        try:
            facts = validated(message, db)
        except Refused as exc:
            db.commit()  # a nonce it used stays used
            return _refused(request, str(exc), claimed_platform(db, params))
        if facts.message_type == DEEP_LINKING:
            if not facts.teaches:
                db.commit()
                return _refused(request, "only instructors add activities", facts.platform, 403)
            try:
                key = deep_linking.remember_request(db, facts)
            except Refused as exc:
                db.commit()
                return _refused(request, str(exc), facts.platform)
            db.commit()
            return _page(request, facts.platform.frame_origins, heading="Add an exercise",
                         picking=True, exercises=exercises, launch_id=key)
        if facts.message_type != RESOURCE_LINK:
            db.commit()
            return _refused(request, f"this tool does not take {facts.message_type} messages",
                            facts.platform)
        return _enter_from_link(request, db, facts, exercises)


def _enter_from_link(request: Request, db: Session, facts: LaunchFacts, exercises) -> HTMLResponse:
    user = user_for(db, facts.platform, facts.sub, facts.name, facts.teaches)
    link = link_for(db, facts, exercises)
    if link is None and not facts.teaches:
        db.commit()
        return _refused(request, "this activity is tied to no exercise yet: ask your "
                        "instructor to choose one for it", facts.platform, 409)
    if link is not None and not facts.teaches:
        follow(db, link, user.id, facts.sub, request.app.state.settings.late_policy)
    target = f"/exercises/{link.exercise}" if link else "/admin/lti"
    code = new_entry(db, user.id, target)
    db.commit()
    log.info("LTI launch: %s (%s) from %s into %s", user.username,
             "instructor" if facts.teaches else "student", facts.platform.issuer, target)
    title = exercises[link.exercise].title if link else "the instructor's pages"
    return _page(request, facts.platform.frame_origins, heading=title,
                 greeting=f"Signed in from your course as {user.display_name}.", code=code)


@router.post("/lti/deep-link")
def deep_link(request: Request, launch: str = Form(""), exercise: str = Form(""),
              db: Session = Depends(get_db, scope="function")):
    """The instructor's pick, sent back to the LMS as a signed resource link through a form
    that posts itself (inside the frame, to the LMS's return URL)."""
    exercises = request.app.state.exercises
    if not csrf.same_origin(request):
        return _refused(request, "that form came from another site", status_code=403)
    if exercise not in exercises:
        return _refused(request, f"there is no exercise {exercise!r}", status_code=422)
    try:
        done = deep_linking.answer(db, request.app.state.settings, launch, exercise,
                                   exercises[exercise].title, tool_base(request) + "/lti/launch")
    except Refused as exc:
        db.commit()
        return _refused(request, str(exc))
    db.commit()
    response = templates.TemplateResponse(request, "lti_post.html",
                                          {"return_url": done.return_url, "jwt": done.jwt})
    response.headers["content-security-policy"] = framed_policy(
        done.frame_origins, (origin_of(done.return_url),))
    return response


@router.get("/lti/enter/{code}", response_class=HTMLResponse)
def enter_page(request: Request, code: str, db: Session = Depends(get_db, scope="function")):
    """The new tab: whose link it is, and a button to go on as them. A GET signs no one in:
    a link someone else sent would sign this browser in as them, and this browser's work
    would then be theirs (login CSRF)."""
    entry = peek_entry(db, code)
    user = db.get(User, entry["user_id"]) if entry else None
    if user is None:
        return RedirectResponse("/signin?expired_link=1", status_code=303)
    return render(request, "lti_enter.html", None, code=code, who=user.display_name)


@router.post("/lti/enter")
def enter(request: Request, code: str = Form(""),
          db: Session = Depends(get_db, scope="function")):
    """The button: a live code (spent here) signs this browser in, first-party, and goes on."""
    if not csrf.same_origin(request):
        return RedirectResponse("/signin?expired_link=1", status_code=303)
    entry = use_entry(db, code)
    user = db.get(User, entry["user_id"]) if entry else None
    if user is None:
        db.commit()
        return RedirectResponse("/signin?expired_link=1", status_code=303)
    response = RedirectResponse(own_path(entry["next"]), status_code=303)
    set_session_cookie(response, request, start_session(db, user, session_lifetime(request)))
    return response


@router.get("/lti/jwks.json")
def jwks(request: Request):
    """The tool's public keys: platforms verify our service tokens and deep links by them."""
    return JSONResponse(keys.jwks(request.app.state.settings),
                        headers={"cache-control": "max-age=300"})
