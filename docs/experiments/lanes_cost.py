"""What a grading costs by its lanes (issue 43): its wall time and the host's CPU-seconds.

    python3 docs/experiments/lanes_cost.py --lanes 1 2 4 8 --repeat 6 --out FILE.json

For each lane count, starts ``python -m graders worker --lanes L`` (2L + 1 runners kept
warm), waits until it says ready, sends the three references one at a time (as
``graders bench --back-to-back`` does), then waits for the pool to be refilled. The host's
busy CPU-seconds (/proc/stat) over that window, less the idle rate measured before it,
divided by the gradings, is what one grading costs the host: its runners made again, its
compiles on every lane, the checks and the timing. Each grading's phases and timeline (what
each lane did when) go to the JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REFERENCES = [("safe_softmax", "reference_solutions/safe_softmax/solution.py"),
              ("masked_softmax", "reference_solutions/masked_softmax/solution.py"),
              ("online_softmax", "reference_solutions/online_softmax/solution.py")]


def busy_seconds() -> float:
    """The host's CPU-seconds spent not idle since boot, all cores together."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def idle_busy_rate(settle_s: float = 2.0, over_s: float = 3.0) -> float:
    """The host's busy CPU-seconds a second while a worker that said ready sits idle
    (after ``settle_s``, over ``over_s``): what a window's count is less."""
    time.sleep(settle_s)
    b0, t0 = busy_seconds(), time.monotonic()
    time.sleep(over_s)
    return (busy_seconds() - b0) / (time.monotonic() - t0)


def grade_reference(worker: subprocess.Popen, i: int) -> tuple[str, float, dict]:
    """The i-th reference (in turn) sent to a ``graders worker``: its exercise, the seconds
    to its answer, and its result."""
    exercise, path = REFERENCES[i % len(REFERENCES)]
    sent = time.monotonic()
    worker.stdin.write(json.dumps({"id": i, "exercise": exercise, "file": str(REPO / path),
                                   "timing": True}) + "\n")
    worker.stdin.flush()
    answer = json.loads(worker.stdout.readline())
    while "check" in answer:
        answer = json.loads(worker.stdout.readline())
    answered = round(time.monotonic() - sent, 3)
    # then the worker says the job settled (its runners gone, its slot judged): the next
    # job is sent after that, as the server's slot claims only then
    while not json.loads(worker.stdout.readline()).get("settled"):
        pass
    return exercise, answered, answer.get("result") or {}


def one_config(lanes: int, repeat: int, refill_s: float) -> dict:
    started = time.monotonic()
    worker = subprocess.Popen([sys.executable, "-m", "graders", "worker", "--device", "cuda",
                               "--lanes", str(lanes)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
    ready = json.loads(worker.stdout.readline())
    ready_s = time.monotonic() - started
    idle_rate = idle_busy_rate()
    rows = []
    b0, t0 = busy_seconds(), time.monotonic()
    for i in range(repeat):
        exercise, wall_s, result = grade_reference(worker, i)
        phases = result.get("phases") or {}
        rows.append({"exercise": exercise, "wall_s": wall_s,
                     "verdict": result.get("verdict"), "score": result.get("score"),
                     "phases": phases,
                     "timed": [{k: s.get(k) for k in ("label", "fraction", "reps", "retimed_from")}
                               for s in (result.get("performance") or {}).get("shapes", [])]})
        print(f"lanes {lanes} {exercise:<15} {result.get('verdict')!s:<8} "
              f"{rows[-1]['wall_s']:6.2f} s  checks {phases.get('checks_s')} warmup "
              f"{phases.get('timing_warmup_s')} timing {phases.get('timing_s')} close "
              f"{phases.get('close_s')} runners {phases.get('runners')}", flush=True)
    graded_s = time.monotonic() - t0
    time.sleep(refill_s)  # the pool makes the runners the gradings took
    window = time.monotonic() - t0
    cpu = busy_seconds() - b0 - idle_rate * window
    worker.stdin.close()
    worker.wait(timeout=120)
    walls = [r["wall_s"] for r in rows]
    summary = {"lanes": lanes, "ready_s": round(ready_s, 1), "ready": ready,
               "p50_s": round(statistics.median(walls), 2), "max_s": max(walls),
               "graded_s": round(graded_s, 1), "idle_cpu_rate": round(idle_rate, 2),
               "cpu_s_per_grading": round(cpu / repeat, 1)}
    print(json.dumps(summary), flush=True)
    return {"summary": summary, "rows": rows}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lanes", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--repeat", type=int, default=6)
    p.add_argument("--refill-s", type=float, default=15.0)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    runs = [one_config(n, args.repeat, args.refill_s) for n in args.lanes]
    print("lanes  p50 s  max s  CPU-s per grading")
    for r in runs:
        s = r["summary"]
        print(f"{s['lanes']:>5} {s['p50_s']:6.2f} {s['max_s']:6.2f} {s['cpu_s_per_grading']:8.1f}")
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
