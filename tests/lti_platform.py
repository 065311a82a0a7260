"""An LMS for the LTI tests: an LTI 1.3 platform built on ``lti1p3platform`` (an independent
platform implementation, not this project's code), served over real HTTP on 127.0.0.1.

It does what Canvas or Moodle does for a tool: starts the OIDC login (``/start``, a user's
click on an activity), answers the tool's authentication request with a signed launch
(``/authorize``), publishes its keys (``/jwks``), hands out service tokens (``/token``),
takes scores (AGS, ``/lineitems/{id}/scores``), lists a course's members (NRPS,
``/memberships``), and takes deep linking's answer (``/dl_return``), after which the new
activity carries what the tool put in it (its custom ``exercise``, its line item).

What a test needs to look at is kept in ``Platform``: scores taken, activities made, and
``launch_changes``, claims a test bends to make a bad launch (expired, another deployment,
a wrong signature).
"""

from __future__ import annotations

import html
import json
import threading
import time
from dataclasses import dataclass, field

import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from fastapi import Request as HttpRequest
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request as PlatformRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import (AssignmentsGradesService,
                                              NamesRoleProvisioningService)

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
COURSE = ("course-1", "GPU kernels 101")


def new_key() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


@dataclass
class Activity:
    """A resource link the LMS shows in the course (made by deep linking)."""
    id: str
    title: str
    custom: dict
    lineitem: str


@dataclass
class Platform:
    port: int
    tool: str  # the tool's base URL
    client_id: str = "client-1"
    deployment_id: str = "dep-1"
    key: tuple[str, str] = field(default_factory=new_key)
    scores: list[tuple[str, dict]] = field(default_factory=list)  # (line item, score)
    activities: dict[str, Activity] = field(default_factory=dict)
    members: list[dict] = field(default_factory=list)
    launch_changes: dict = field(default_factory=dict)  # bends the next launches (bad ones)
    names: dict[str, str] = field(default_factory=dict)  # user id -> full name

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    issuer = url  # the LMS's issuer is its address, as Moodle's is

    def registration(self) -> Registration:
        private, public = self.key
        changes = self.launch_changes
        # a forger: another key signs, under the kid of the key the LMS publishes
        kind = _PublishedKid if changes.get("forge_kid") else Registration
        return (kind().set_iss(self.url).set_client_id(self.client_id)
                .set_deployment_id(changes.get("deployment_id", self.deployment_id))
                .set_launch_url(f"{self.tool}/lti/launch")
                .set_deeplink_launch_url(f"{self.tool}/lti/launch")
                .set_oidc_login_url(f"{self.tool}/lti/login")
                .set_tool_key_set_url(f"{self.tool}/lti/jwks.json")
                .set_platform_public_key(public)
                .set_platform_private_key(changes.get("signing_key", private)))

    def jwks(self) -> dict:
        # the published key is always the platform's own (a bent signing key is not in it)
        private, public = self.key
        conf = _conf(self, Registration().set_platform_public_key(public)
                     .set_platform_private_key(private))
        return conf.get_jwks()

    def start_url(self, user: str, *, role: str = LEARNER, activity: str = "",
                  deep: bool = False) -> str:
        """Where a user's click on an activity (or the instructor's "add content") goes."""
        from urllib.parse import urlencode
        return f"{self.url}/start?" + urlencode({"user": user, "role": role,
                                                 "activity": activity, "deep": int(deep)})


class _PublishedKid(Registration):
    def get_kid(self):
        return Registration.get_jwk(self.get_platform_public_key()).get("kid")


def _conf(platform: Platform, registration: Registration | None = None):
    class Conf(LTI1P3PlatformConfAbstract):
        def init_platform_config(self, **kwargs):
            pass

        def get_registration_by_params(self, **kwargs):
            return registration or platform.registration()
    conf = Conf()
    conf.get_registration()
    return conf


class _Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs):
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url):
        return RedirectResponse(url, status_code=302)


class _Launch(LTIAdvantageMessageLaunchAbstract):
    def get_preflight_response(self):
        return dict(self._request.query_params)

    def render_launch_form(self, launch_data, **kwargs):
        # what an LMS answers: a form that posts itself to the tool (in a browser)
        action = html.escape(launch_data["launch_url"])
        return HTMLResponse(
            f'<form method="POST" action="{action}" id="launch">'
            f'<input type="hidden" name="id_token" value="{launch_data["id_token"]}">'
            f'<input type="hidden" name="state" value="{html.escape(launch_data["state"])}">'
            f'<noscript><button>Go</button></noscript></form>'
            f'<script>document.getElementById("launch").submit()</script>')


class _Request(PlatformRequest):
    def build_metadata(self, data):
        return data


async def _metadata(request: HttpRequest) -> _Request:
    body = await request.body()
    return _Request({"method": request.method, "form_data": {},
                     "get_data": dict(request.query_params), "headers": request.headers,
                     "content_type": request.headers.get("content-type"),
                     "path": request.url.path, "json": json.loads(body) if body else None})


def app_for(platform: Platform) -> FastAPI:
    app = FastAPI()

    class Grades(AssignmentsGradesService):
        def find_lineitems(self, page=1, limit=None):
            return {"content": [], "has_next": False}

        def find_lineitem(self, line_item_id):
            return {"id": f"{platform.url}/lineitems/{line_item_id}"}

        def create_lineitem(self, lineitem):
            return lineitem

        def update_lineitem(self, *args, **kwargs):
            return {}

        def delete_lineitem(self, *args, **kwargs):
            return None

        def update_score(self, line_item_id, score):
            platform.scores.append((line_item_id, dict(score)))
            return UpdateScoreStatus.SUCCESS

        def get_results(self, *args, **kwargs):
            return {"content": [], "has_next": False}

    class Members(NamesRoleProvisioningService):
        def get_context_by_id(self):
            return Context(id=COURSE[0], label="K101", title=COURSE[1])

        def get_member_data_page(self, **kwargs):
            return {"content": platform.members, "has_next": False}

    @app.get("/jwks")
    def jwks():
        return platform.jwks()

    @app.get("/start")
    def start(user: str, role: str = LEARNER, activity: str = "", deep: int = 0):
        login = _Login(None, _conf(platform))
        login.set_lti_message_hint(hint=json.dumps({"role": role, "activity": activity,
                                                    "deep": deep}))
        if deep:
            login.set_deeplinking_launch_url()
        return login.initiate_login(user)

    @app.get("/authorize")
    def authorize(request: HttpRequest):
        query = dict(request.query_params)
        hint = json.loads(query.get("lti_message_hint") or "{}")
        launch = _Launch(request, _conf(platform))
        user = query["login_hint"]
        launch.set_user_data(user, [hint.get("role", LEARNER)],
                             full_name=platform.names.get(user, f"User {user}"))
        launch.set_launch_context_claim(COURSE[0], context_title=COURSE[1])
        launch.set_nrps(f"{platform.url}/memberships")
        if "expires_in" in platform.launch_changes:
            launch.set_id_token_expiration(platform.launch_changes["expires_in"])
        if hint.get("deep"):
            launch.set_dl(f"{platform.url}/dl_return", accept_types={"ltiResourceLink"})
        else:
            activity = platform.activities[hint["activity"]]
            launch.set_resource_link_claim(activity.id, title=activity.title)
            launch.set_custom_parameters_claim(activity.custom)
            launch.set_ags(f"{platform.url}/lineitems", activity.lineitem)
        return launch.lti_launch()

    @app.post("/token")
    async def token(request: HttpRequest):
        return _conf(platform).get_access_token(dict(await request.form()))

    @app.post("/lineitems/{line_item}/scores")
    async def scores(line_item: str, request: HttpRequest):
        service = Grades(await _metadata(request), _conf(platform), f"{platform.url}/lineitems",
                         f"{platform.url}/lineitems/{line_item}")
        answer = service.handle_resp(service.handle_update_score, line_item_id=line_item)
        return JSONResponse(answer.result or {"message": answer.message}, status_code=answer.code)

    @app.get("/memberships")
    async def memberships(request: HttpRequest):
        service = Members(await _metadata(request), _conf(platform), f"{platform.url}/memberships")
        answer = service.handle_resp(service.handle_get_members)
        return JSONResponse(answer.result, status_code=answer.code, media_type=answer.media_type)

    @app.post("/dl_return")
    async def dl_return(request: HttpRequest):
        """Deep linking's answer: checked, and each link in it becomes an activity."""
        # checked against the tool's JWKS; the content items it holds
        items = _conf(platform).validate_deeplinking_resp(dict(await request.form()))
        for item in items:
            number = len(platform.activities) + 1
            activity = Activity(f"rl-{number}", item.get("title", ""), item.get("custom") or {},
                                f"{platform.url}/lineitems/li-{number}")
            platform.activities[activity.id] = activity
        return HTMLResponse(f"<h1>Activity added</h1><p id='added'>{len(platform.activities)}</p>")

    @app.get("/course")
    def course(src: str):
        """The course page: the tool in a frame, as an LMS shows it."""
        return HTMLResponse(f"<h1>{COURSE[1]}</h1><iframe id='tool' src='{html.escape(src)}' "
                            f"width='900' height='600'></iframe>")

    return app


class Served:
    """The platform's HTTP server, on a thread; stopped and started again on the same port
    when a test takes the LMS down."""

    def __init__(self, platform: Platform):
        self.platform = platform
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        config = uvicorn.Config(app_for(self.platform), host="127.0.0.1",
                                port=self.platform.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                return
            time.sleep(0.05)
        raise RuntimeError("the test platform did not start")

    def stop(self) -> None:
        if self.server:
            self.server.should_exit = True
            self.thread.join(timeout=10)
            self.server = None
