"""Back to back through one `graders worker --device cpu --warm W` (issue 43, fifteenth session).

    .venv/bin/python docs/experiments/cpu_warm_b2b.py W N

Starts the worker, waits for its ready line, then sends the three references in turn, N jobs,
each once the one before is answered, and prints each job's wall time and ``acquire_s`` (the
time it waited for a runner): whether W runners kept warm are enough for a slot's next
grading to find one ready.
"""
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FILES = [("safe_softmax", "reference_solutions/safe_softmax/solution.py"),
         ("masked_softmax", "reference_solutions/masked_softmax/solution.py"),
         ("online_softmax", "reference_solutions/online_softmax/solution.py")]


def main() -> None:
    warm, n = sys.argv[1], int(sys.argv[2])
    t0 = time.monotonic()
    worker = subprocess.Popen([sys.executable, "-m", "graders", "worker", "--device", "cpu",
                               "--warm", warm], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=REPO)
    ready = json.loads(worker.stdout.readline())
    print("ready", ready, round(time.monotonic() - t0, 2))
    walls, waits = [], []
    for i in range(n):
        exercise, path = FILES[i % len(FILES)]
        sent = time.monotonic()
        worker.stdin.write(json.dumps({"id": i, "exercise": exercise, "file": path}) + "\n")
        worker.stdin.flush()
        while True:  # progress lines ("check") come before the answer
            line = json.loads(worker.stdout.readline())
            if "result" in line or "error" in line:
                break
        result = line["result"]
        walls.append(time.monotonic() - sent)
        waits.append(result["phases"].get("acquire_s"))
        print(i, result["verdict"], round(walls[-1], 2), waits[-1])
    worker.stdin.close()
    worker.wait()
    walls.sort()
    print("warm", warm, "p50", round(walls[len(walls) // 2], 2), "max", round(walls[-1], 2),
          "acquire max", max(waits))


if __name__ == "__main__":
    main()
