"""The FastAPI application: migrations, the instructor's token, exercises, the pool."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import select
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from .api import (admin, events, exercises, extensions, internal, leaderboard, metrics, similarity,
                  submissions)
from .auth.sessions import COOKIE, end_sessions_of
from .auth.tokens import hash_token, new_token
from .core.body_limits import BodyLimit
from .core.db import make_engine, make_sessionmaker, pool_size_for
from .core.fairness import FairStart
from .core.migrate import upgrade
from .core.principal_limits import ADDRESS, INSTRUCTOR, STUDENT, WORKER, Budget, PrincipalLimits
from .core.security_headers import SecurityHeaders
from .core.settings import Settings, get_settings
from .core.shared_state import StampWatcher
from .domain.models import Role, User
from .domain.student_params import warn_if_development_secret
from .grading.graders_client import GradersClient
from .grading.local_pool import Dispatcher, LocalPool
from .lti.grades import Sender as LtiGradeSender
from .web import api_token, class_view, guards, instructor, lti_admin, render, signin, student
from .web import extensions as web_extensions
from .web import lti as web_lti
from .web import leaderboard as web_leaderboard
from .web import similarity as web_similarity

log = logging.getLogger("server")


def bootstrap_instructor(sessions, settings: Settings) -> str | None:
    """ADMIN_TOKEN, or on first start a new token, printed once. Returns a new token."""
    with sessions.begin() as db:
        admin_user = db.scalar(select(User).where(User.username == "instructor"))
        if settings.admin_token:
            digest = hash_token(settings.admin_token)
            if admin_user is None:
                db.add(User(username="instructor", display_name="Instructor",
                            role=Role.INSTRUCTOR, token_hash=digest))
            elif admin_user.token_hash != digest:  # a new ADMIN_TOKEN signs the old one's out
                admin_user.token_hash = digest
                end_sessions_of(db, [admin_user.id])
            return None
        if admin_user is None:
            token = new_token()
            db.add(User(username="instructor", display_name="Instructor", role=Role.INSTRUCTOR,
                        token_hash=hash_token(token)))
            return token
    return None


def make_dispatcher(sessions, client: GradersClient, settings: Settings,
                    exercises: dict | None = None) -> Dispatcher:
    """The embedded default grades here; ``DISPATCHER=celery`` on remote workers. Both
    send each job its student's exercise parameters, derived from ``exercises``."""
    if settings.dispatcher == "celery":
        from .grading.celery_dispatch import CeleryDispatcher

        return CeleryDispatcher(sessions, settings, exercises=exercises)
    return LocalPool(sessions, client, settings, exercises=exercises)


def budgets_from(settings: Settings) -> dict[str, Budget]:
    return {STUDENT: Budget(settings.max_requests_per_student, settings.max_streams_per_student),
            INSTRUCTOR: Budget(settings.max_requests_per_instructor,
                               settings.max_streams_per_instructor),
            ADDRESS: Budget(settings.max_requests_per_address, settings.max_streams_per_address),
            WORKER: Budget(settings.max_requests_per_worker_host, 0)}


class PrincipalLimitsOf(PrincipalLimits):
    """The limits, reachable from the app's state once Starlette has built them."""

    def __init__(self, asgi_app, owner: FastAPI, **options):
        super().__init__(asgi_app, **options)
        owner.state.principal_limits = self


def create_app(settings: Settings | None = None, dispatcher: Dispatcher | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # the blocking parts of requests run on these threads, and the pool holds a
        # connection for each (server/core/db.py's pool_size_for)
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.request_threads
        engine = make_engine(settings.database_url,
                             pool_size_for(settings.request_threads, settings.db_pool_size),
                             settings.db_pool_timeout_s)
        upgrade(engine)
        sessions = make_sessionmaker(engine)
        client = GradersClient(settings)
        app.state.settings = settings
        app.state.sessionmaker = sessions
        app.state.exercises = client.exercises()
        token = bootstrap_instructor(sessions, settings)
        if token:
            print(f"Instructor token (shown once, store it now): {token}", flush=True)
        warn_if_development_secret(settings)
        app.state.dispatcher = dispatcher or make_dispatcher(sessions, client, settings,
                                                             app.state.exercises)
        app.state.dispatcher.start()
        # other server processes' changes (shared_state.py)
        watcher = app.state.stamp_watcher = StampWatcher(engine)
        watcher.start()
        # scores owed to LMSs (LTI AGS), stored before sent: server/lti/grades.py
        app.state.lti_sender = LtiGradeSender(sessions, settings)
        app.state.lti_sender.start()
        log.info("serving %d exercises from %s", len(app.state.exercises),
                 engine.url.render_as_string(hide_password=True))
        yield
        watcher.stop()
        app.state.lti_sender.stop()
        app.state.dispatcher.stop()
        engine.dispose()

    app = FastAPI(title="Softmax autograder", version="0.1.0", lifespan=lifespan,
                  description="Submit Triton kernels for the A07 softmax exercises; read verdicts "
                              "and the leaderboard.")
    for module in (submissions, events, exercises, leaderboard, admin, similarity, extensions,
                   internal, metrics, signin, student, web_leaderboard, instructor, web_extensions,
                   web_lti, lti_admin, api_token, class_view,
                   web_similarity):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=render.FRONTEND / "static"), name="static")
    # a roster upload's tokens, until their one showing (server/web/instructor.py)
    app.state.issued_rosters = {}
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes,
                       timeout_s=settings.body_timeout_s)
    app.add_middleware(SecurityHeaders)  # CSP, no-store, nosniff (server/core/security_headers.py)
    # a request waiting its turn has not started its body's clock
    app.add_middleware(FairStart)
    # added last, so outermost: a principal past its budget is refused before it waits
    # for a turn, with no thread and no connection (issue 39)
    app.state.principal_limits = None  # set when the middleware stack is built (tests read it)
    app.add_middleware(PrincipalLimitsOf, owner=app, budgets=budgets_from(settings), cookie=COOKIE)

    # the last line of defence: input that broke a parser or an encoder below our own
    # checks (FastAPI parsing a body nested too deep, say) is the client's, and a 400
    @app.exception_handler(RecursionError)
    @app.exception_handler(UnicodeError)
    @app.exception_handler(OverflowError)
    async def bad_input(request: Request, exc: Exception):
        log.warning("bad input on %s: %s", request.url.path, type(exc).__name__)
        return JSONResponse(status_code=400, content={
            "detail": f"the request could not be read ({type(exc).__name__}): too deep, not "
                      "valid Unicode, or a number out of range"})

    @app.exception_handler(StarletteHTTPException)
    async def pages_get_pages(request: Request, exc: StarletteHTTPException):
        """The API answers {"detail": …}; a page answers with a page."""
        if request.url.path.startswith("/api") or exc.status_code in (301, 302, 303, 307):
            return await http_exception_handler(request, exc)
        titles = {401: "Please sign in", 403: "Not for you", 404: "Not found"}
        user = guards.user_for_token_in(request)
        return render.render(request, "error.html", user, exc.status_code, status=exc.status_code,
                          title=titles.get(exc.status_code, "Something went wrong"),
                          detail=exc.detail)

    # and a value the database itself refuses (PostgreSQL: a NUL character in a query
    # string or a form field; SQLite stores it) is the client's too, never a 500
    @app.exception_handler(DataError)
    async def unstorable_input(request: Request, exc: DataError):
        log.warning("input the database refused on %s: %s", request.url.path,
                    str(exc.orig).splitlines()[0] if exc.orig else type(exc).__name__)
        return await pages_get_pages(request, StarletteHTTPException(
            422, "the request holds a value the database cannot store (a NUL character, say)"))

    # the database busy past DB_POOL_TIMEOUT_S (every connection in use) or locked: the
    # request is not the client's fault nor a bug of ours, and trying again later works
    @app.exception_handler(PoolTimeout)
    @app.exception_handler(OperationalError)
    async def database_busy(request: Request, exc: Exception):
        orig = getattr(exc, "orig", None) or exc  # the driver's own words say which wait ran out
        log.warning("database busy on %s: %s: %s", request.url.path, type(exc).__name__,
                    str(orig).splitlines()[0] if str(orig) else "")
        detail = "the server is busy: try again in a few seconds"
        if not request.url.path.startswith("/api"):  # no page: a page reads the database
            return PlainTextResponse(detail[0].upper() + detail[1:] + ".\n", status_code=503,
                                     headers={"Retry-After": "2"})
        return JSONResponse(status_code=503, headers={"Retry-After": "2"},
                            content={"detail": detail})

    def readiness(request: Request) -> dict:
        """Whether every grading slot of this server is warm (its runners started, the seed
        cache built): a first grading sent before then waits for them."""
        dispatcher = getattr(request.app.state, "dispatcher", None)
        counts = getattr(dispatcher, "readiness", lambda: None)()
        if counts is None:
            return {"ready": True}
        warm, slots = counts
        return {"ready": warm >= slots, "slots": slots, "slots_warm": warm}

    @app.get("/api/health", tags=["health"])
    def health(request: Request):
        """Liveness: the server answers (whether its slots are warm yet is told too)."""
        return {"ok": True, **readiness(request)}

    @app.get("/api/ready", tags=["health"])
    def ready(request: Request):
        """Readiness: 200 once every slot is warm, 503 before (a load balancer, compose's
        health check and the benches wait on this one)."""
        state = readiness(request)
        if state["ready"]:
            return state
        return JSONResponse(status_code=503, headers={"Retry-After": "2"}, content=state)

    return app
