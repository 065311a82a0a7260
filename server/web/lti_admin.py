"""The instructor's LTI page (/admin/lti): the URLs an LMS admin pastes, the platforms
registered (and a form to register one), the courses seen with their activities and a
roster pull each, and the grades owed to the LMSs: pending, or failed with the LMS's words."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..auth import csrf
from ..auth.deps import get_db
from ..domain.lti_records import LtiLink, LtiPlatform, LtiScore
from ..domain.models import User
from ..lti import keys, registry, roster
from ..lti.grades import retry_failed
from .guards import instructor_page
from .lti import tool_base
from .render import render

router = APIRouter(include_in_schema=False)

SAID = {"registered": "Platform registered: {what}.",
        "roster": "Roster pulled: {what}.",
        "retried": "{what} failed grade pushes are owed again."}


def tool_urls(base: str) -> dict[str, str]:
    """What an LMS admin pastes, by what their forms call it (docs/lti.md)."""
    return {"OpenID Connect login initiation URL": f"{base}/lti/login",
            "Redirect (launch) URI and target link URI": f"{base}/lti/launch",
            "Deep linking (content selection) URL": f"{base}/lti/launch",
            "Public keyset (JWKS) URL": f"{base}/lti/jwks.json"}


def lti_view(request: Request, user: User, db: Session, status: int = 200,
             **extra) -> HTMLResponse:
    base = tool_base(request)
    courses = db.execute(select(LtiLink, LtiPlatform.issuer)
                         .join(LtiPlatform, LtiPlatform.id == LtiLink.platform_id)
                         .order_by(LtiLink.platform_id, LtiLink.context_title, LtiLink.id)).all()
    owed = db.execute(select(LtiScore, User.username, LtiLink.exercise, LtiLink.context_title)
                      .join(User, User.id == LtiScore.user_id)
                      .join(LtiLink, LtiLink.id == LtiScore.link_id)
                      .where(LtiScore.state != "sent").order_by(LtiScore.state, LtiScore.id)
                      .limit(500)).all()
    counts = dict(db.execute(select(LtiScore.state, func.count()).group_by(LtiScore.state)).all())
    notice = ""
    done = request.query_params.get("done", "")
    if done in SAID:
        notice = SAID[done].format(what=request.query_params.get("what", "")[:200])
    return render(request, "admin_lti.html", user, status, urls=tool_urls(base),
                  key=keys.current(request.app.state.settings),
                  platforms=registry.platforms(db), courses=courses, owed=owed, counts=counts,
                  notice=notice, **extra)


@router.get("/admin/lti", response_class=HTMLResponse)
def lti_page(request: Request, user: User = Depends(instructor_page),
             db: Session = Depends(get_db, scope="function")):
    return lti_view(request, user, db)


def _done(kind: str, what: str) -> RedirectResponse:
    return RedirectResponse("/admin/lti?" + urlencode({"done": kind, "what": what}),
                            status_code=303)


@router.post("/admin/lti/platforms", response_class=HTMLResponse,
             dependencies=[Depends(csrf.check_form)])
def register_platform(request: Request, issuer: str = Form(""), client_id: str = Form(""),
                      deployment_ids: str = Form(""), auth_login_url: str = Form(""),
                      auth_token_url: str = Form(""), key_set_url: str = Form(""),
                      frame_origins: str = Form(""), user: User = Depends(instructor_page),
                      db: Session = Depends(get_db, scope="function")):
    fields = registry.PlatformFields(
        issuer=issuer, client_id=client_id,
        deployment_ids=tuple(deployment_ids.replace(",", " ").split()),
        auth_login_url=auth_login_url, auth_token_url=auth_token_url, key_set_url=key_set_url,
        frame_origins=tuple(frame_origins.replace(",", " ").split()))
    try:
        registry.register(db, fields)
    except registry.Unregistrable as exc:
        db.rollback()
        return lti_view(request, user, db, 422, error=str(exc), form=fields)
    db.commit()
    return _done("registered", f"{issuer.strip()} ({client_id.strip()})")


@router.post("/admin/lti/roster", response_class=HTMLResponse,
             dependencies=[Depends(csrf.check_form)])
def pull_roster(request: Request, platform_id: int = Form(0), context_id: str = Form(""),
                user: User = Depends(instructor_page),
                db: Session = Depends(get_db, scope="function")):
    platform = db.get(LtiPlatform, platform_id)
    if platform is None:
        return lti_view(request, user, db, 404, error="That platform is not registered.")
    try:
        pulled = roster.pull(db, request.app.state.settings, platform, context_id)
    except roster.RosterUnavailable as exc:
        db.rollback()
        return lti_view(request, user, db, 502, error=str(exc)[0].upper() + str(exc)[1:] + ".")
    db.commit()
    return _done("roster", f"{pulled.students} students, {pulled.instructors} instructors"
                           + (f", {pulled.skipped} inactive left out" if pulled.skipped else ""))


@router.post("/admin/lti/retry", dependencies=[Depends(csrf.check_form)])
def retry(request: Request, user: User = Depends(instructor_page),
          db: Session = Depends(get_db, scope="function")):
    count = retry_failed(db)
    db.commit()
    request.app.state.lti_sender.wake()
    return _done("retried", str(count))
