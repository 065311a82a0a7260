"""The grading's own connections to the database, apart from the requests' pool (issue 39).

A burst of requests once held every connection of the one pool, and a slot's finished
result, which waited for a connection behind them, was dropped. So each dispatcher opens a
small pool of its own on the same database for what keeps a grade from being lost: claims,
leases (heartbeats), results, and the remote workers' reports.

And each try through it waits ``GRADING_DB_WAIT_S`` at most, for a connection, a lock
(SQLite's busy timeout, PostgreSQL's ``lock_timeout``) or a server that does not answer
(``connect_timeout``): a try that cannot go through fails soon and is tried again by whoever
holds the result (the slot, the outbox, the worker), instead of holding a thread for
minutes. The requests' pool keeps its own, longer waits.
"""

from __future__ import annotations

import math

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from ..core.db import make_engine, make_sessionmaker
from ..core.settings import Settings


def database_url(requests: sessionmaker[Session], settings: Settings) -> str:
    """The URL the requests' sessions reach (the settings' when they name no engine)."""
    bind = requests.kw.get("bind")
    if bind is None:
        return settings.database_url
    return bind.url.render_as_string(hide_password=False)


def _waits_short(engine: Engine, wait_s: float) -> None:
    wait_ms = max(1, int(wait_s * 1000))
    if engine.dialect.name == "sqlite":
        # after make_engine's own pragmas (listeners run in the order they were added)
        @event.listens_for(engine, "connect")
        def _busy_timeout(dbapi_conn, _):
            cursor = dbapi_conn.cursor()
            cursor.execute(f"PRAGMA busy_timeout={wait_ms}")
            cursor.close()
            # the driver would begin a transaction only at the first write, so a store's
            # SELECT ... FOR UPDATE (which SQLite ignores) read outside it: two stores of one
            # attempt could both find it running. Each grading transaction takes the write
            # lock when it begins instead: they are short, and SQLite has one writer anyway
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin_immediate(connection):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif engine.dialect.name == "postgresql":
        @event.listens_for(engine, "do_connect")
        def _timeouts(dialect, conn_rec, cargs, cparams):
            cparams.setdefault("connect_timeout", max(2, math.ceil(wait_s)))  # libpq: >= 2
            options = cparams.get("options", "")
            cparams["options"] = f"{options} -c lock_timeout={wait_ms}".strip()


def grading_sessions(requests: sessionmaker[Session], settings: Settings,
                     size: int) -> sessionmaker[Session]:
    """Sessions on the requests' database through a pool of ``size`` connections of its
    own. An in-memory SQLite database lives in its one connection: there the requests'
    sessions are returned, as no second pool could reach it."""
    url = database_url(requests, settings)
    if url.startswith("sqlite") and url.split("///", 1)[-1] in ("", ":memory:"):
        return requests
    engine = make_engine(url, size, settings.grading_db_wait_s)
    _waits_short(engine, settings.grading_db_wait_s)
    return make_sessionmaker(engine)


def close(grading: sessionmaker[Session], requests: sessionmaker[Session]) -> None:
    """Close the grading's own pool (not the requests', when they are one)."""
    if grading is not requests:
        grading.kw["bind"].dispose()
