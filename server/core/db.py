"""The database: an engine per URL, SQLite in WAL mode, PostgreSQL by URL."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

POOL_MARGIN = 8  # connections opened past the pool's size when a burst needs them


def pool_size_for(request_threads: int, configured: int = 0) -> int:
    """The connections a server process keeps for its requests: one for each request
    thread (a request holds one only while a thread of its uses it: server/auth/deps.py),
    and 16 for what runs beside them (the change-stamp watcher, a metrics scrape, an error
    page's look-up) and a margin. POOL_MARGIN more open on demand. The grading has a pool
    of its own (server/grading/grading_db.py)."""
    return configured or request_threads + 16


def _create_private(path: str) -> None:
    """Create the database file 0600 if it is not there, and make it 0600 if it is.

    Never by opening an existing file: this process may hold SQLite connections to it
    already (the grading's pool is a second engine on the same file), and closing any
    descriptor of a file drops every POSIX lock the process holds on it. Another process
    closing its last connection would then find none, take the database as unused, and
    delete the WAL and shared-memory files under this process's connections (a page
    then read "disk I/O error", and writes went to an unlinked WAL)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    except FileExistsError:
        pass
    os.chmod(path, 0o600)  # by its name: no descriptor opened


def make_engine(url: str, pool_size: int | None = None, pool_timeout_s: float = 30.0) -> Engine:
    """``pool_size``: connections kept (None: SQLAlchemy's default, 5 and 10 more on
    demand); a checkout waits ``pool_timeout_s`` at most, then raises TimeoutError, which
    the server answers 503 (server/app.py)."""
    pool = {} if pool_size is None else {"pool_size": pool_size, "max_overflow": POOL_MARGIN,
                                         "pool_timeout": pool_timeout_s}
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # tokens' hashes and every source live here: owner only (SQLite gives its
            # -wal and -shm files the database file's mode)
            _create_private(path)
        if not path or path == ":memory:":
            pool = {}  # one connection, shared: no pool to size
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               **pool)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _):
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")  # readers don't block the writer
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **pool)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
