"""Latency of gradings on one warm slot, as the server's worker runs them (issue 11).

    python3 docs/experiments/worker_latency.py --device cuda --repeat 10 --out FILE.json

Starts ``python -m graders worker`` (one slot, warm runners), feeds it the safe-softmax
reference ``--repeat`` times with timing, then one of each other kind of submission,
and prints each grading's wall time and phases (runner start, load, each check, timing),
then p50/p95 of the reference. The worker's wall time is what a submission waits from
being claimed to its result being written, less the server's few milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REF = REPO / "reference_solutions"
sys.path.insert(0, str(REPO))
from graders.proof.mutants import get_mutant, materialise  # noqa: E402

MUTANTS = Path(tempfile.mkdtemp(prefix="latency-mutants-"))


def mutant(exercise: str, name: str) -> Path:
    """A mutant of the reference, applied from its patch into a temporary folder."""
    return materialise(get_mutant(exercise, name), MUTANTS)

EXTRA = [  # (exercise, file, timing)
    ("masked_softmax", REF / "masked_softmax" / "solution.py", True),
    ("online_softmax", REF / "online_softmax" / "solution.py", True),
    ("safe_softmax", REF / "safe_softmax" / "solution.hip", True),
    ("safe_softmax", REF / "safe_softmax" / "from_scratch" / "row_per_program.py", True),
    ("safe_softmax", REF / "safe_softmax" / "from_scratch" / "row_per_program_naive_exp.py", True),
    ("safe_softmax", REF / "safe_softmax" / "from_scratch" / "row_per_program_tail_zero.py", True),
    ("safe_softmax", mutant("safe_softmax", "naive_unsafe_exp"), True),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--extra", action="store_true", help="also the other kinds of submission")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    jobs = [("safe_softmax", REF / "safe_softmax" / "solution.py", True)] * args.repeat
    if args.extra:
        jobs += EXTRA
    started = time.monotonic()
    worker = subprocess.Popen([sys.executable, "-m", "graders", "worker", "--device", args.device],
                              cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              bufsize=1)
    ready = json.loads(worker.stdout.readline())
    print(f"worker ready after {time.monotonic() - started:.1f} s: {ready}", flush=True)
    rows = []
    for i, (exercise, path, timing) in enumerate(jobs):
        sent = time.monotonic()
        worker.stdin.write(json.dumps({"id": i, "exercise": exercise, "file": str(path),
                                       "timing": timing}) + "\n")
        worker.stdin.flush()
        answer = json.loads(worker.stdout.readline())
        while "check" in answer:  # a check's line while the rest runs (graders.service.worker)
            answer = json.loads(worker.stdout.readline())
        wall = time.monotonic() - sent
        # the job settled (its runners gone, its slot judged) before the next is sent
        while not json.loads(worker.stdout.readline()).get("settled"):
            pass
        result = answer["result"] or {}
        failed = [c["name"] for c in result.get("checks", []) if not c["passed"]]
        rows.append({"exercise": exercise, "file": str(path.relative_to(REPO) if path.is_relative_to(REPO) else path.name), "wall_s": wall,
                     "verdict": result.get("verdict"), "score": result.get("score"),
                     "failed": failed, "phases": result.get("phases"),
                     "message": (result.get("message") or "")[:600],
                     "performance": (result.get("performance") or {}).get("fraction_of_copy"),
                     "shapes": [(s.get("label"), round(s.get("fraction", 0), 3))
                                for s in (result.get("performance") or {}).get("shapes", [])],
                     "slot": answer.get("slot")})
        print(f"{path.name:<34} {result.get('verdict')!s:<10} {result.get('score')!s:>7} "
              f"{wall:6.2f} s  failed={failed}  phases={result.get('phases')}", flush=True)
        if result.get("verdict") not in ("passed", "failed"):
            print(f"    {result.get('message', '')[:600]}", flush=True)
    worker.stdin.close()
    worker.wait(timeout=120)
    ref = [r["wall_s"] for r in rows[:args.repeat]]
    summary = {"device": result.get("device_name"), "versions": result.get("versions"),
               "date": time.strftime("%Y-%m-%d"), "reference_p50_s": percentile(ref, 0.5),
               "reference_p95_s": percentile(ref, 0.95), "reference_min_s": min(ref),
               "reference_max_s": max(ref), "reference_mean_s": statistics.mean(ref)}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
