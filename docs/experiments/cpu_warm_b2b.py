"""Back to back through one `graders worker --device cpu --warm W` (issue 43, fifteenth session).

    .venv/bin/python docs/experiments/cpu_warm_b2b.py W N

Starts the worker, waits for its ready line, then sends the three references in turn, N jobs,
each once the one before is answered (lanes_cost.py's ``grade_reference``), and prints each
job's wall time and ``acquire_s`` (the time it waited for a runner): whether W runners kept
warm are enough for a slot's next grading to find one ready.
"""
import json
import subprocess
import sys
import time

from lanes_cost import REPO, grade_reference


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
        _, wall_s, result = grade_reference(worker, i)
        walls.append(wall_s)
        waits.append(result["phases"].get("acquire_s"))
        print(i, result["verdict"], wall_s, waits[-1])
    worker.stdin.close()
    worker.wait()
    walls.sort()
    print("warm", warm, "p50", walls[len(walls) // 2], "max", walls[-1],
          "acquire max", max(waits))


if __name__ == "__main__":
    main()
