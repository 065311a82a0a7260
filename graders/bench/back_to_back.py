"""``python -m graders bench --back-to-back N``: what one student waits for, on an idle server.

The real server (``python -m server``, as ``--load`` starts it) is started and waited on until
``/api/ready`` says every slot is warm. Then N passing Triton references (the mix's passing
entries named ``solution.py``, in turn) are submitted one after another, each by a student of
its own with their own parameters, and each waited on (polled every 0.1 s) before the next is
sent. The first is what a class gets from a server that has just said it is ready.

Per submission: answer = ``Record.answer_s`` (stored to graded, as the server records
them), and the client's wall time from POST to seeing it final. Reported: p50 and p95 of the
answers, the first against the median of the rest, and whether the issue's goals hold
(p50 <= 4 s, p95 <= 6 s, the first within 2x a warm one).
"""

from __future__ import annotations

import itertools
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

from graders.bench.load_client import ServerError
from graders.bench.load_harness import Server, load_bench_device, own_params, submission_body
from graders.bench.load_mix import MixEntry, load_mix
from graders.bench.load_record import Record
from graders.bench.load_report import versions_in_words, write_section
from graders.bench.load_stats import percentile

SECTION = "## Back to back: one student at a time"
GOAL_P50_S, GOAL_P95_S, GOAL_FIRST_OVER_WARM = 4.0, 6.0, 2.0


def reference_entries(entries: list[MixEntry]) -> list[MixEntry]:
    """The passing Triton references of the mix, one per exercise, in the manifest's order."""
    return [e for e in entries if e.klass == "passing" and e.file.name == "solution.py"]


def _send_and_wait(server: Server, entry: MixEntry, token: str, poll_s: float,
                   cap_s: float) -> tuple[Record, float]:
    params = own_params(server, entry, token)
    sent = time.monotonic()
    record = Record(entry, server.call("POST", "/api/submissions", token=token,
                                       body=submission_body(entry, params))["id"], params=params)
    while time.monotonic() - sent < cap_s:
        record.update(server.call("GET", f"/api/submissions/{record.id}", token=token))
        if record.done:
            break
        time.sleep(poll_s)
    return record, time.monotonic() - sent


def render(records: list[Record], walls: list[float], device: str, slots_per_gpu: int,
           ready_s: float | None) -> str:
    answers = [r.answer_s for r in records if r.answer_s is not None]
    p50, p95 = percentile(answers, 50), percentile(answers, 95)
    first = answers[0] if answers else None
    warm = percentile(answers[1:], 50)
    ratio = first / warm if first is not None and warm else None
    held = [p50 is not None and p50 <= GOAL_P50_S, p95 is not None and p95 <= GOAL_P95_S,
            ratio is not None and ratio <= GOAL_FIRST_OVER_WARM,
            all(r.verdict == "passed" for r in records)]
    where, versions = versions_in_words(records)

    def s(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    lines = [SECTION, "",
             f"`python -m graders bench --back-to-back {len(records)} --device {device} "
             f"--slots-per-gpu {slots_per_gpu}` on {where}, {time.strftime('%Y-%m-%d')}; "
             f"{versions}.",
             f"The server said ready (`/api/ready`) {s(ready_s)} s after it was started.", "",
             "| # | file | verdict | answer s | client s | grader s |", "|---|---|---|---|---|---|"]
    for i, (r, wall) in enumerate(zip(records, walls), 1):
        lines.append(f"| {i} | {r.entry.label} | {r.verdict or r.status} | {s(r.answer_s)} "
                     f"| {s(wall)} | {s(r.grader_s)} |")
    lines += ["",
              f"Answer (stored to graded): p50 {s(p50)} s, p95 {s(p95)} s; the first after "
              f"start {s(first)} s against a warm median of {s(warm)} s ({s(ratio)}x).",
              f"Goals (issue 43): p50 ≤ {GOAL_P50_S:g} s, p95 ≤ {GOAL_P95_S:g} s, the first "
              f"within {GOAL_FIRST_OVER_WARM:g}x a warm one, every reference passed: "
              + ("**met**." if all(held) else "**not met**."), ""]
    return "\n".join(lines)


def run_back_to_back(out: Path | None, count: int = 12, device: str = "auto", port: int = 0,
                     slots_per_gpu: int = 1, poll_s: float = 0.1,
                     cap_s: float = 600, results: Path | None = None) -> int:
    """0 when every submission was graded, 1 when one was not within ``cap_s``, 2 when the
    server could not be run. ``results``: a JSON file of each grading's record and result
    (its phases and timeline: what each lane did when), as ``--load`` writes."""
    kind = load_bench_device(device)
    refs = reference_entries(load_mix())
    if not refs or count < 1:
        print("back to back: nothing to send", file=sys.stderr)
        return 2
    chosen = list(itertools.islice(itertools.cycle(refs), count))
    records, walls = [], []
    with tempfile.TemporaryDirectory(prefix="back-to-back-") as tmp:
        server = Server(device, port, Path(tmp), slots_per_gpu=slots_per_gpu)
        try:
            with server:
                print(f"back to back: server on {server.base}, ready after "
                      f"{server.ready_s:.1f} s; {count} references, one at a time", flush=True)
                stamp = secrets.token_hex(3)
                roster = [{"username": f"b2b-{stamp}-{i:03d}", "display_name": f"B2B {i}"}
                          for i in range(count)]
                tokens = [st["token"] for st in server.call(
                    "POST", "/api/admin/students", body={"students": roster})["students"]]
                for entry, token in zip(chosen, tokens):
                    record, wall = _send_and_wait(server, entry, token, poll_s, cap_s)
                    records.append(record)
                    walls.append(wall)
                    print(f"  {entry.label}: {record.verdict or record.status} in {wall:.2f} s",
                          flush=True)
        except (ServerError, OSError) as exc:
            print(f"back to back: {exc}\n--- server log ---\n{server.log_tail()}",
                  file=sys.stderr)
            return 2
    section = render(records, walls, kind, slots_per_gpu, server.ready_s)
    print(section, flush=True)
    if out:
        write_section(out, section)
        print(f"wrote the section to {out}")
    if results:
        results.write_text(json.dumps([r.to_json() for r in records], indent=1))
        print(f"wrote each grading's result to {results}")
    return 0 if all(r.done for r in records) else 1
