"""The load bench's harness: the real server (``python -m server``) as a subprocess on a
temporary SQLite database, started and stopped, and the burst through it: a student per
submission, every submission at once, polled until each is final."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from graders.bench.load_client import ServerError, http_json
from graders.bench.load_mix import REPO_ROOT, MixEntry, source_for
from graders.bench.load_record import Record
from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX

# The server's environment. Limits high enough that the burst is never refused: the
# bench measures grading, not the rate limits. GRADING_SLOTS=1: one GPU (SLOTS_PER_GPU
# slots on it, server/grading/local_pool.py default_slots), or one CPU-interpreter slot.
SERVER_ENV = {
    "GRADING_SLOTS": "1",
    "SUBMISSIONS_PER_HOUR": "1000000",
    "MAX_IN_FLIGHT_PER_STUDENT": "1000",
    "MAX_QUEUE_DEPTH": "1000000",
}
# settings that would change what is measured if they leaked in from the caller's shell
SERVER_ENV_DROPPED = ("GRADER_COMMAND", "GRADER_PYTHON", "DEADLINES", "PUBLIC_URL")


def load_bench_device(device: str) -> str:
    """cpu or cuda, as the server's pool will decide it (server/grading/local_pool.py
    default_slots): the GPU when asked for, or on auto when a /dev/nvidiaN node exists."""
    if device == "cpu":
        return "cpu"
    if device == "cuda":
        return "cuda"
    has_gpu = any(p.name[len("nvidia"):].isdigit() for p in Path("/dev").glob("nvidia*"))
    return "cuda" if has_gpu else "cpu"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m server`` on a temporary SQLite database, stopped on exit."""

    def __init__(self, device: str, port: int, workdir: Path, slots_per_gpu: int = 1):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.admin_token = secrets.token_urlsafe(24)
        self.log_path = workdir / "server.log"
        self.env = {k: v for k, v in os.environ.items() if k not in SERVER_ENV_DROPPED}
        self.env.update(SERVER_ENV, DATABASE_URL=f"sqlite:///{workdir / 'load.db'}",
                        ADMIN_TOKEN=self.admin_token, GRADER_DEVICE=device,
                        SLOTS_PER_GPU=str(slots_per_gpu), PYTHONUNBUFFERED="1")
        self.proc: subprocess.Popen | None = None
        self.ready_s: float | None = None  # from the process's start to /api/ready

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout_s: float = 180) -> None:
        log = self.log_path.open("wb")
        # its own session, so stop() can end the server and whatever it started
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()
        started = time.monotonic()
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"the server exited {self.proc.returncode} on start:\n"
                                  f"{self.log_tail()}")
            try:
                # ready: every slot's runners warm (503 before), so that the first grading
                # measured is the first a class would get from a server that says ready
                if http_json("GET", self.base + "/api/ready", timeout=2).get("ready"):
                    self.ready_s = time.monotonic() - started
                    return
            except (OSError, ServerError):
                pass  # not listening, or not ready, yet
            time.sleep(0.3)
        raise ServerError(f"the server was not ready (/api/ready) in {timeout_s:g} s:\n"
                          f"{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        # SIGTERM lets uvicorn shut down; a grader still running dies with the server
        # (the graders client sets PR_SET_PDEATHSIG on it)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def call(self, method: str, path: str, token: str | None = None,
             body: dict | None = None) -> dict:
        return http_json(method, self.base + path, token or self.admin_token, body)


def own_params(server: Server, entry: MixEntry, token: str) -> dict:
    """The student's values of the entry's exercise parameters, as their exercise page
    shows them (the API's ``params`` for a signed-in student); {} for an entry that does
    not write them in (its exercise has none, or the manifest says how not)."""
    if not entry.own_params:
        return {}
    return server.call("GET", f"/api/exercises/{entry.exercise}", token=token).get(
        "params") or {}


def submission_body(entry: MixEntry, params: dict) -> dict:
    """The API's submission body for an entry, sent as its student would send it: with that
    student's own parameters written in (graders/bench/load_mix.py ``source_for``)."""
    return {"exercise": entry.exercise,
            "language": LANGUAGE_BY_SUFFIX[entry.file.suffix.lower()],
            "filename": entry.file.name, "source": source_for(entry, params)}


def submit_all(server: Server, entries: list[MixEntry]) -> list[Record]:
    """One student per submission (the per-student limits never bite), then the burst.
    Each file is sent as its student would send it: with that student's own parameters
    written in (graders/bench/load_mix.py ``source_for``), so a correct file passes."""
    stamp = secrets.token_hex(3)
    roster = [{"username": f"load-{stamp}-{i:03d}", "display_name": f"Load {i}"}
              for i in range(len(entries))]
    tokens = [s["token"] for s in server.call("POST", "/api/admin/students",
                                              body={"students": roster})["students"]]
    # read every source (and every student's parameters) first, so the burst is as tight
    # as HTTP allows
    params = [own_params(server, e, token) for e, token in zip(entries, tokens)]
    bodies = [submission_body(e, p) for e, p in zip(entries, params)]
    records = []
    for entry, token, body, mine in zip(entries, tokens, bodies, params):
        reply = server.call("POST", "/api/submissions", token=token, body=body)
        records.append(Record(entry, reply["id"], params=mine))
    return records


def wait_for_all(server: Server, records: list[Record], time_cap_s: float,
                 poll_s: float) -> bool:
    """Poll the instructor's list until every submission is final; False at the cap."""
    by_id = {r.id: r for r in records}
    started = time.monotonic()
    reported = -1
    while True:
        for row in server.call("GET", "/api/admin/submissions")["submissions"]:
            if row["id"] in by_id:
                by_id[row["id"]].update(row)
        done = sum(r.done for r in records)
        if done != reported:
            running = [r.entry.label for r in records if r.status == "running"]
            print(f"[{time.monotonic() - started:6.0f} s] {done}/{len(records)} done"
                  f"{'; grading ' + running[0] if running else ''}", flush=True)
            reported = done
        if done == len(records):
            return True
        if time.monotonic() - started > time_cap_s:
            print(f"stopped waiting after {time_cap_s:g} s", flush=True)
            return False
        time.sleep(poll_s)


def fetch_results(server: Server, records: list[Record]) -> None:
    """The full JSON of each (versions, the grader's duration); the list leaves it out."""
    for r in records:
        r.update(server.call("GET", f"/api/submissions/{r.id}"))
