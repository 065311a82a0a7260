"""``python -m graders bench --load``: a realistic mix through the real server, one GPU.

The server is started as a subprocess (``python -m server``) on a fresh SQLite database,
with one grading slot (or, ``--slots-per-gpu N``, N slots sharing one GPU) and limits
raised so that nothing is refused. One student per
submission is added through the roster API, the whole mix (``mix/manifest.toml``) is
submitted at once, and the submissions are polled until each is graded (or ``error``).
Nothing of the server is imported here: it is driven over HTTP with urllib, as a
client would, so the figures include the queue, the grader's process start and the
database.

Per submission: latency = finished_at - started_at (the slot's claim to the stored
result) and wait = started_at - created_at (time in the queue). Per class: p50, p95
and max latency, and the verdicts seen. Throughput = gradings / (last finished_at -
first started_at), an hour. The target (issue: "≥ 400 gradings an hour per H200, no
non-hostile submission over 20 s") is checked and said. Timing spread: how much the
measured speed of one passing file varies between its gradings (``--rounds 2`` or more),
to compare sharing the GPU with not sharing it.
"""

from __future__ import annotations

import atexit
import datetime
import json
import math
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from graders.proof.mutants import get_mutant, materialise
from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX

REPO_ROOT = Path(__file__).resolve().parents[2]
MIX_DIR = Path(__file__).resolve().parent / "mix"
MANIFEST = MIX_DIR / "manifest.toml"

SECTION = "## Throughput: the mix through the queue"
CLASSES = ("passing", "row_per_program", "mutant", "hostile")
HOSTILE = "hostile"
TARGET_PER_HOUR = 400
TARGET_MAX_LATENCY_S = 20.0
DONE = ("graded", "error")  # a submission's final states

# The server's environment. Limits high enough that the burst is never refused: the
# bench measures grading, not the rate limits. GRADING_SLOTS=1: one GPU (SLOTS_PER_GPU
# slots on it, server/queue.py default_slots), or one CPU-interpreter slot.
SERVER_ENV = {
    "GRADING_SLOTS": "1",
    "SUBMISSIONS_PER_HOUR": "1000000",
    "MAX_IN_FLIGHT_PER_STUDENT": "1000",
    "MAX_QUEUE_DEPTH": "1000000",
}
# settings that would change what is measured if they leaked in from the caller's shell
SERVER_ENV_DROPPED = ("GRADER_COMMAND", "GRADER_PYTHON", "DEADLINES", "PUBLIC_URL")


# -- the mix -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MixEntry:
    file: Path  # absolute: the file submitted
    exercise: str
    klass: str  # one of CLASSES
    what: str = ""
    shown: str = ""  # how the tables name it, when not by its path (a mutant's patch)

    @property
    def label(self) -> str:
        """The file as the tables show it: relative to the repository when inside it."""
        if self.shown:
            return self.shown
        try:
            return str(self.file.relative_to(REPO_ROOT))
        except ValueError:
            return self.file.name


def load_mix(manifest: Path = MANIFEST) -> list[MixEntry]:
    """The entries of the manifest, each file checked to exist and each mutant's patch
    applied (a renamed file or a stale patch fails here, not halfway through a GPU run).
    Mutants are written to a temporary folder, removed when this process exits."""
    entries = []
    folder = None
    for row in tomllib.loads(manifest.read_text())["entry"]:
        where = row.get("file") or row.get("mutant")
        if "mutant" in row:
            if folder is None:
                folder = Path(tempfile.mkdtemp(prefix="mix-mutants-"))
                atexit.register(shutil.rmtree, folder, ignore_errors=True)
            mutant = get_mutant(row["exercise"], row["mutant"])
            file = materialise(mutant, folder)
            shown = str(mutant.patch.relative_to(REPO_ROOT)) if mutant.patch.is_relative_to(
                REPO_ROOT) else mutant.label
        else:
            file, shown = REPO_ROOT / row["file"], ""
        entry = MixEntry(file, row["exercise"], row["class"], row.get("what", ""), shown)
        if entry.klass not in CLASSES:
            raise ValueError(f"{manifest}: {where}: unknown class {entry.klass!r}")
        if not entry.file.is_file():
            raise FileNotFoundError(f"{manifest}: {where} does not exist")
        entries.append(entry)
    return entries


def resolve_device(device: str) -> str:
    """cpu or cuda, as the server's pool will decide it (server/queue.py default_slots):
    the GPU when asked for, or on auto when a /dev/nvidiaN node exists."""
    if device == "cpu":
        return "cpu"
    if device == "cuda":
        return "cuda"
    has_gpu = any(p.name[len("nvidia"):].isdigit() for p in Path("/dev").glob("nvidia*"))
    return "cuda" if has_gpu else "cpu"


def select_mix(entries: list[MixEntry], device_kind: str,
               only_classes: list[str] | tuple[str, ...] | None) -> list[MixEntry]:
    """The entries to send. On the CPU the hostile class is left out unless asked for by
    name: the endless kernel would spin in the interpreter until the 300 s limit."""
    if only_classes:
        unknown = set(only_classes) - set(CLASSES)
        if unknown:
            raise ValueError(f"unknown classes {sorted(unknown)} (known: {', '.join(CLASSES)})")
        return [e for e in entries if e.klass in only_classes]
    if device_kind == "cpu":
        return [e for e in entries if e.klass != HOSTILE]
    return list(entries)


# -- the server, as a subprocess ---------------------------------------------------------
class ServerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(method: str, url: str, token: str | None = None, body: dict | None = None,
              timeout: float = 30) -> dict:
    """One JSON request; an HTTP error becomes a ServerError with the server's detail."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise ServerError(f"{method} {url}: HTTP {exc.code}: {detail}") from None


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
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"the server exited {self.proc.returncode} on start:\n"
                                  f"{self.log_tail()}")
            try:
                if http_json("GET", self.base + "/api/health", timeout=2).get("ok"):
                    return
            except (OSError, ServerError):
                pass  # not listening yet
            time.sleep(0.3)
        raise ServerError(f"the server did not answer /api/health in {timeout_s:g} s:\n"
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


# -- one submission's record -------------------------------------------------------------
def parse_time(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(value) if value else None


@dataclass
class Record:
    entry: MixEntry
    id: int
    status: str = "queued"
    verdict: str | None = None
    score: float | None = None
    created_at: datetime.datetime | None = None
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    result: dict | None = None

    def update(self, row: dict) -> None:
        """From the API's submission JSON."""
        self.status, self.verdict, self.score = row["status"], row["verdict"], row["score"]
        self.created_at = parse_time(row["created_at"])
        self.started_at = parse_time(row["started_at"])
        self.finished_at = parse_time(row["finished_at"])
        if row.get("result") is not None:
            self.result = row["result"]

    @property
    def done(self) -> bool:
        return self.status in DONE and self.finished_at is not None

    @property
    def latency_s(self) -> float | None:
        """The slot's claim to the stored result."""
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def wait_s(self) -> float | None:
        if self.created_at and self.started_at:
            return (self.started_at - self.created_at).total_seconds()
        return None

    @property
    def grader_s(self) -> float | None:
        """The grader's own duration (runner start to verdict), from its JSON."""
        return (self.result or {}).get("duration_s")


# -- arithmetic --------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def per_hour(count: int, seconds: float) -> float | None:
    return count / seconds * 3600 if count and seconds > 0 else None


def span_s(records: list[Record]) -> float | None:
    """Seconds from the first claim to the last stored result of the finished ones."""
    done = [r for r in records if r.done and r.started_at]
    if not done:
        return None
    return (max(r.finished_at for r in done) - min(r.started_at for r in done)).total_seconds()


def throughput_per_hour(records: list[Record]) -> float | None:
    """Finished gradings per hour of wall clock, first claim to last stored result."""
    span = span_s(records)
    return None if span is None else per_hour(sum(r.done for r in records), span)


def busy_per_hour(records: list[Record]) -> float | None:
    """Gradings per hour of a slot's own busy time (the sum of their latencies): what
    a slot does for these submissions alone, whatever else was in the queue."""
    latencies = [r.latency_s for r in records if r.done and r.latency_s is not None]
    return per_hour(len(latencies), sum(latencies))


@dataclass
class ClassRow:
    name: str
    n: int
    p50_s: float | None
    p95_s: float | None
    max_s: float | None
    wait_p50_s: float | None
    verdicts: dict[str, int]


def class_row(name: str, records: list[Record]) -> ClassRow:
    latencies = [r.latency_s for r in records if r.latency_s is not None and r.done]
    waits = [r.wait_s for r in records if r.wait_s is not None]
    verdicts: dict[str, int] = {}
    for r in records:
        key = r.verdict if r.done else f"unfinished ({r.status})"
        if r.status == "error":
            key = f"error ({r.verdict})"
        verdicts[key] = verdicts.get(key, 0) + 1
    return ClassRow(name, len(records), percentile(latencies, 50), percentile(latencies, 95),
                    max(latencies) if latencies else None, percentile(waits, 50), verdicts)


def class_rows(records: list[Record]) -> list[ClassRow]:
    """One row per class present (in CLASSES order), then all but hostile, then all."""
    rows = [class_row(k, [r for r in records if r.entry.klass == k])
            for k in CLASSES if any(r.entry.klass == k for r in records)]
    if any(r.entry.klass == HOSTILE for r in records) and len(rows) > 1:
        rows.append(class_row("all but hostile",
                              [r for r in records if r.entry.klass != HOSTILE]))
    rows.append(class_row("all", records))
    return rows


def timing_spread(records: list[Record], figure: str) -> tuple[float, float, int] | None:
    """(median, max, files) of the spread of performance ``figure`` over the passing files
    graded more than once: each file's (max − min) / median of its timed values. None
    when no file was timed twice."""
    values: dict[tuple[str, str], list[float]] = {}
    for r in records:
        value = ((r.result or {}).get("performance") or {}).get(figure)
        if r.entry.klass == "passing" and r.done and isinstance(value, (int, float)):
            values.setdefault((r.entry.label, r.entry.exercise), []).append(float(value))
    spreads = [(max(v) - min(v)) / statistics.median(v) for v in values.values()
               if len(v) > 1 and statistics.median(v) > 0]
    if not spreads:
        return None
    return statistics.median(spreads), max(spreads), len(spreads)


# -- markdown ----------------------------------------------------------------------------
def _s(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _versions(records: list[Record]) -> tuple[str, str]:
    """(device, versions) in words, from the first result that carries them."""
    for r in records:
        result = r.result or {}
        if result.get("versions"):
            versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)
            grader = result.get("grader_version")
            if grader:
                versions += f", graders {grader}"
            device = result.get("device_name") or (
                "the CPU interpreter" if result.get("device") == "cpu" else result.get("device"))
            return str(device or "unknown device"), versions
    return "unknown device", "versions unknown (no result)"


def target_verdict(records: list[Record], rate: float | None) -> str:
    """Whether the issue's target is met, and if not, why."""
    slow = [r for r in records if r.entry.klass != HOSTILE
            and (not r.done or (r.latency_s or 0) > TARGET_MAX_LATENCY_S)]
    misses = []
    if rate is None or rate < TARGET_PER_HOUR:
        misses.append(f"{_s(rate, 0)} an hour is under {TARGET_PER_HOUR}")
    if slow:
        worst = max(slow, key=lambda r: r.latency_s or math.inf)
        misses.append(f"{len(slow)} non-hostile gradings over {TARGET_MAX_LATENCY_S:g} s or "
                      f"unfinished (slowest {worst.entry.label}, {_s(worst.latency_s)} s)")
    head = (f"Target: ≥ {TARGET_PER_HOUR} gradings an hour, no non-hostile grading over "
            f"{TARGET_MAX_LATENCY_S:g} s: ")
    return head + ("**met**." if not misses else "**missed**: " + "; ".join(misses) + ".")


def spread_line(records: list[Record]) -> str:
    """The timing spread in words: sharing the GPU must not make timings less repeatable."""
    head = ("Timing spread (passing files graded more than once; per file (max − min) / "
            "median of its speed, then the median and max over the files): ")
    parts = []
    for figure, name in (("fraction_of_copy", "fraction of copy"), ("gbs", "GB/s")):
        spread = timing_spread(records, figure)
        if spread is not None:
            median, worst, files = spread
            parts.append(f"{name} median {median:.1%}, max {worst:.1%} ({files} files)")
    return head + ("; ".join(parts) if parts else "— (no passing file was timed twice: "
                                                  "`--rounds 2` or more).")


def section_heading(slots_per_gpu: int) -> str:
    """Sharing on and off keep a section each in one file, to be compared."""
    return SECTION if slots_per_gpu <= 1 else f"{SECTION}, {slots_per_gpu} slots per GPU"


def _slots_words(slots_per_gpu: int) -> str:
    if slots_per_gpu <= 1:
        return "one grading slot (SLOTS_PER_GPU=1)"
    return (f"{slots_per_gpu} grading slots sharing one GPU (SLOTS_PER_GPU={slots_per_gpu}: "
            "their checks side by side, each timing alone)")


def _left_out(skipped: list[MixEntry]) -> str:
    classes = sorted({e.klass for e in skipped})
    why = ("the CPU interpreter would spin on the endless kernel until its 300 s limit"
           if HOSTILE in classes else "not asked for")
    return f"Left out: {len(skipped)} submissions of class {', '.join(classes)} ({why})."


def render_section(records: list[Record], device_arg: str, rounds: int,
                   skipped: list[MixEntry], today: datetime.date | None = None,
                   mix_name: str = "the mix of `graders/bench/mix/manifest.toml`",
                   slots_per_gpu: int = 1) -> str:
    """The markdown section: how it was measured, the summary, per class, per submission."""
    today = today or datetime.date.today()
    device, versions = _versions(records)
    rate = throughput_per_hour(records)
    done = [r for r in records if r.done]
    copies = f", {rounds} copies of it" if rounds > 1 else ""

    md = [section_heading(slots_per_gpu), "",
          f"Measured by `python -m graders bench --load` on {device}, {today.isoformat()}; "
          f"{versions}. The real server (`python -m server`, SQLite, GRADER_DEVICE="
          f"{device_arg}) with {_slots_words(slots_per_gpu)}; one student per "
          "submission; "
          f"{len(records)} submissions, {mix_name}{copies}, sent at once. Latency = the "
          "slot's claim to the stored result (finished_at − started_at); wait = time queued "
          "(started_at − created_at); grader = the grader's own duration_s.", ""]
    if skipped:
        md += [_left_out(skipped), ""]
    summary = (f"**{_s(rate, 0)} gradings per hour**: {len(done)} of {len(records)} graded in "
               f"{_s(span_s(records), 0)} s, first claim to last stored result.")
    if any(r.entry.klass == HOSTILE for r in records):
        realistic = [r for r in records if r.entry.klass != HOSTILE]
        summary += (" Without the hostile class, a slot's busy rate (their count over the "
                    f"sum of their latencies) is {_s(busy_per_hour(realistic), 0)} an hour.")
    md += [summary, "", target_verdict(records, rate), "", spread_line(records), ""]

    md += ["| class | n | p50 s | p95 s | max s | p50 wait s | verdicts |",
           "|---|---|---|---|---|---|---|"]
    for row in class_rows(records):
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(row.verdicts.items()))
        md.append(f"| {row.name} | {row.n} | {_s(row.p50_s)} | {_s(row.p95_s)} | "
                  f"{_s(row.max_s)} | {_s(row.wait_p50_s)} | {verdicts} |")

    md += ["", "| # | file | exercise | class | verdict | score | latency s | wait s | grader s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        verdict = r.verdict if r.done else f"unfinished ({r.status})"
        score = "—" if r.score is None else f"{r.score:g}"
        md.append(f"| {r.id} | {r.entry.label} | {r.entry.exercise} | {r.entry.klass} | "
                  f"{verdict} | {score} | "
                  f"{_s(r.latency_s)} | {_s(r.wait_s)} | {_s(r.grader_s)} |")
    return "\n".join(md) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the section (by its heading, its first line) in the file, or append it; the
    rest of the file is kept.

    The section runs from its heading to the next level-2 heading or HTML comment line
    (`graders bench` keeps its notes after such a marker). Appended at the end, it sits in
    the part `graders bench --out` keeps, so the two benches do not erase each other."""
    text = path.read_text() if path.exists() else ""
    heading = section.splitlines()[0].rstrip()
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        joiner = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n")
                                                               else "\n\n")
        path.write_text(text + joiner + section)
        return
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("## ") or lines[i].startswith("<!--")), len(lines))
    tail = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + section + ("\n" + tail if tail else ""))


# -- the run -----------------------------------------------------------------------------
def submit_all(server: Server, entries: list[MixEntry]) -> list[Record]:
    """One student per submission (the per-student limits never bite), then the burst."""
    stamp = secrets.token_hex(3)
    roster = [{"username": f"load-{stamp}-{i:03d}", "display_name": f"Load {i}"}
              for i in range(len(entries))]
    tokens = [s["token"] for s in server.call("POST", "/api/admin/students",
                                              body={"students": roster})["students"]]
    # read every source first, so the burst is as tight as HTTP allows
    bodies = [{"exercise": e.exercise, "language": LANGUAGE_BY_SUFFIX[e.file.suffix.lower()],
               "filename": e.file.name, "source": e.file.read_text()} for e in entries]
    records = []
    for entry, token, body in zip(entries, tokens, bodies):
        reply = server.call("POST", "/api/submissions", token=token, body=body)
        records.append(Record(entry, reply["id"]))
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


def run_load_bench(out: Path | None, device: str = "auto", port: int = 0, rounds: int = 1,
                   only_classes=None, *, mix: list[MixEntry] | None = None,
                   time_cap_s: float | None = None, poll_s: float = 1.0,
                   slots_per_gpu: int = 1) -> int:
    """Grade the mix through the server's queue on one GPU's slots (or one CPU slot);
    print (and with `out`, record) p50/p95 per class and gradings per hour. 0 when every
    submission was graded, 1 when some were not (the time cap), 2 when the server could
    not be run.

    `mix` replaces the manifest (tests); `rounds` sends that many copies in one burst;
    `slots_per_gpu` is the server's SLOTS_PER_GPU (on the CPU it changes nothing)."""
    entries = mix if mix is not None else load_mix()
    kind = resolve_device(device)
    slots_per_gpu = max(1, slots_per_gpu) if kind == "cuda" else 1  # the CPU has one slot
    chosen = select_mix(entries, kind, only_classes)
    skipped = [e for e in entries if e not in chosen]
    chosen = chosen * max(1, rounds)
    if not chosen:
        print("load bench: nothing to send", file=sys.stderr)
        return 2
    if skipped:
        print(f"load bench: leaving out {len(skipped)} entries "
              f"({', '.join(sorted({e.klass for e in skipped}))})", flush=True)
    # generous: the hostile ones may each run to the 300 s limit, and a CPU grading ~40 s
    time_cap_s = time_cap_s or 600 + 330 * len(chosen)

    with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp:
        server = Server(device, port, Path(tmp), slots_per_gpu=slots_per_gpu)
        try:
            with server:
                print(f"load bench: server on {server.base}, GRADER_DEVICE={device}, "
                      f"SLOTS_PER_GPU={slots_per_gpu}, {len(chosen)} submissions", flush=True)
                records = submit_all(server, chosen)
                finished = wait_for_all(server, records, time_cap_s, poll_s)
                fetch_results(server, records)
        except (ServerError, OSError) as exc:
            print(f"load bench: {exc}\n--- server log ---\n{server.log_tail()}",
                  file=sys.stderr)
            return 2

    section = render_section(records, device, rounds, skipped,
                             mix_name="a mix given by the caller" if mix is not None else
                             "the mix of `graders/bench/mix/manifest.toml`",
                             slots_per_gpu=slots_per_gpu)
    print(section, flush=True)
    if out:
        write_section(out, section)
        print(f"wrote the section to {out}")
    return 0 if finished else 1
