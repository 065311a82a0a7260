"""Settings from the environment (pydantic-settings), with embedded defaults.

Defaults run everything on one machine: SQLite under ``var/``, a local grading
pool, the GPU when one is visible, else the CPU interpreter.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from . import strength

REPO_ROOT = Path(__file__).resolve().parents[2]
# DEVELOPMENT ONLY. Each student's exercise parameters are derived from COURSE_SECRET
# (server/domain/student_params.py): anyone who knows it can compute every student's numbers, and
# this one is in the repository. The server logs a warning at start while it is in use.
DEV_COURSE_SECRET = "development-only-course-secret:set-COURSE_SECRET"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    database_url: str = f"sqlite:///{REPO_ROOT / 'var' / 'autograder.db'}"
    admin_token: str | None = None  # the instructor's token; made and printed once when unset
    public_url: str = ""  # how students reach the server, for the "url" of a submission
    # derives each student's exercise parameters (their own shape, say); keep it for the
    # course's whole run: a new one gives every student new numbers
    course_secret: str = DEV_COURSE_SECRET
    # when set, GET /metrics asks for it as a bearer token (Prometheus' `authorization`);
    # unset, the counts are public, as on a server only the operator's proxy reaches
    metrics_token: str | None = None
    session_days: float = 14.0  # a browser's sign-in lasts this long (server/auth/sessions.py)

    # grading
    grader_python: str = sys.executable  # the Python that runs `-m graders`
    grader_device: str = "auto"  # auto | cpu | cuda
    grading_slots: int = 0  # 0: every visible GPU, else one CPU-interpreter slot;
    # N: the first N GPUs (or N CPU-interpreter slots)
    # slots on each GPU, one worker process each: >1 runs one grading's checks beside
    # another's (the GPU idles while a grading compiles); timings still take the GPU alone.
    # 0 (unset): sized from the host's CPU cores and GPU memory (server/grading/slot_sizing.py)
    slots_per_gpu: int = 0
    # each grading runner's GPU memory cap, in MiB (issue 43; graders/isolation/gpu_memory.py):
    # unset, each slot's worker sizes it from its GPU's memory and the GPU's slots; 0: no cap
    gpu_memory_cap_mib: int | None = None
    grader_timeout_s: float = 900  # the grader process as a whole (its runner has its own)
    grader_command: str = ""  # tests only: a stand-in for `python -m graders`
    max_grader_attempts: int = 3  # grader_error retried this often, then `error`

    # who grades: `local` (the embedded default: slots in this process's machine) or
    # `celery` (workers on other hosts, through a Redis broker; server/grading/celery_dispatch.py)
    dispatcher: str = "local"
    broker_url: str = "redis://127.0.0.1:6379/0"
    grader_queue: str = "cuda"  # the Celery queue (device kind) jobs are published to
    task_secret: str = ""  # signs each task's result credential; kept in var/ when unset
    publish_window: int = 4  # jobs published and not yet started, at most (a broker lost
    # with its messages loses no more than these, and they come back after publish_timeout_s)
    publish_timeout_s: float = 60.0  # published, never started: put back and published again
    heartbeat_timeout_s: float = 30.0  # a started job's worker silent this long: put back
    # a grade is never lost (issue 39; server/grading/outbox.py, reaper.py). A finished
    # result is written to a folder before it is stored, and stays there until the database
    # has it: "" puts the folder beside the SQLite file (`outbox/`), else under var/outbox;
    # keep it on a disk that survives a restart of the server
    outbox_dir: str = ""
    # LTI 1.3 (server/lti/): the tool's private keys, 0600, never sent anywhere (the JWKS at
    # /lti/jwks.json publishes their public halves); empty: var/lti/keys
    lti_keys_dir: str = ""
    # every REAPER_INTERVAL_S (or a third of HEARTBEAT_TIMEOUT_S, if less: a lease must be
    # renewed several times before it runs out) each dispatcher stores what its outbox
    # holds, renews the leases of the jobs its local slots grade, and puts back running work
    # nobody renewed for HEARTBEAT_TIMEOUT_S
    reaper_interval_s: float = 10.0
    # the grading's own connections (claims, leases, results, workers' reports) are apart
    # from the requests' pool; one try of theirs waits this long at most for a connection or
    # a lock, then fails and is tried again, rather than holding its thread
    grading_db_wait_s: float = 5.0

    # limits
    max_source_bytes: int = 64 * 1024
    max_body_bytes: int = 1 << 20  # any request body: past it 413, before it is read
    header_timeout_s: float = 10.0  # to send a request's headers, else the connection closes
    body_timeout_s: float = 30.0  # to send its body, else 408
    # open connections one client address may hold (0: no limit); behind a proxy or a
    # campus NAT the whole class is one address: raise it there (server/core/connections.py)
    max_connections_per_client: int = 1000
    # requests in flight and progress streams open at once, per principal (issue 39;
    # server/core/principal_limits.py): past them 429 with Retry-After, at once
    max_requests_per_student: int = 8
    max_streams_per_student: int = 4
    max_requests_per_instructor: int = 32
    max_streams_per_instructor: int = 16
    # a client address, for requests with no credential it has seen accepted: a campus NAT
    # is a whole class behind one address, so this is larger
    max_requests_per_address: int = 64
    max_streams_per_address: int = 8
    max_requests_per_worker_host: int = 64  # /internal/: a grading worker's reports
    # threads for the blocking parts of requests, and the database connections they may
    # hold: a request holds one only while a thread of its uses it (server/auth/deps.py), so
    # REQUEST_THREADS + the dispatcher's own + a margin never wait for one (docs/deploy.md)
    request_threads: int = 40
    db_pool_size: int = 0  # 0: REQUEST_THREADS + GRADING_SLOTS' needs + a margin (db.py)
    db_pool_timeout_s: float = 5.0  # a request that waits longer is answered 503
    # per student and exercise (server/domain/admission.py): a deadline's rush on one exercise
    # leaves the others' room
    submissions_per_hour: int = 20
    max_in_flight_per_student: int = 1
    # waiting submissions, all students together. The database is the queue, so this only
    # bounds what an attack (many accounts) can store: far above a deadline's need (at most
    # students x exercises x MAX_IN_FLIGHT_PER_STUDENT wait at once)
    max_queue_depth: int = 5000
    # a submission refused for want of room holds its time this long: the student's next
    # submission of the exercise within it is judged late or on time by the refused try
    refusal_holds_s: float = 3600.0
    deadlines: dict[str, datetime] = {}  # exercise -> deadline; overrides the spec's
    # how late work counts, on the board, in the API and the CSV (server/domain/submissions.py):
    # on_time_first | best_counts | on_time_only
    late_policy: str = "on_time_first"

    @field_validator("admin_token")
    @classmethod
    def _admin_token_strong(cls, value):
        # the instructor's token guards everything; a weak one is guessed
        return strength.check("ADMIN_TOKEN", value, ", or leave it unset: the server then "
                              "makes one and prints it once")

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token_strong(cls, value):
        return strength.check("METRICS_TOKEN", value, ", or leave it unset")

    @field_validator("course_secret")
    @classmethod
    def _course_secret_strong(cls, value):
        # a weak secret is guessed, and with it every student's numbers
        return strength.check("COURSE_SECRET", value, "")

    @field_validator("task_secret")
    @classmethod
    def _task_secret_strong(cls, value):
        # it signs what a worker may store as a grade; empty: one is made and kept in var/
        return strength.check("TASK_SECRET", value or None, ", or leave it unset") or ""

    @field_validator("dispatcher")
    @classmethod
    def _known_dispatcher(cls, value):
        if value not in ("local", "celery"):
            raise ValueError("DISPATCHER is `local` (grade on this machine) or `celery` "
                             "(workers through BROKER_URL)")
        return value

    @field_validator("late_policy")
    @classmethod
    def _known_late_policy(cls, value):
        if value not in ("on_time_first", "best_counts", "on_time_only"):
            raise ValueError("LATE_POLICY is on_time_first (the default), best_counts or "
                             "on_time_only")
        return value

    @field_validator("deadlines", mode="before")
    @classmethod
    def _parse_deadlines(cls, value):
        return json.loads(value) if isinstance(value, str) and value else (value or {})


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
