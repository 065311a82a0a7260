"""The client side of docs/experiments/worker_as_image.sh, through the load bench's
standard-library client (the GPU image has no curl): wait for the server, submit the
reference, say what became of it.

    python3 docs/experiments/wai_client.py health|submit|status|wait BASE ADMIN_TOKEN

``submit`` sends the reference as a new student before any worker could grade it (its id
and token kept in /tmp/wai/submitted.json); ``status`` says what became of it while workers
that cannot grade came and went; ``wait`` waits for its verdict and prints it.
"""

import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from graders.bench.load import ServerError, http_json  # noqa: E402  (the bench's client)

KEPT = Path("/tmp/wai/submitted.json")

REFERENCE = Path(__file__).resolve().parents[2] / "reference_solutions/safe_softmax/solution.py"


def metrics_text(base):
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:
        return response.read().decode()


def main(what, base, admin):
    if what == "health":
        for _ in range(90):
            try:
                print("server:", http_json("GET", f"{base}/api/health"))
                return
            except (OSError, ServerError):
                time.sleep(1)
        sys.exit("the server did not start")
    if what == "submit":
        student = http_json("POST", f"{base}/api/admin/students", admin,
                       {"students": [{"username": "ada", "display_name": "Ada"}]})["students"][0]
        sid = http_json("POST", f"{base}/api/submissions", student["token"],
                   {"exercise": "safe_softmax", "language": "triton",
                    "source": REFERENCE.read_text()})["id"]
        KEPT.write_text(json.dumps({"id": sid, "token": student["token"], "at": time.time()}))
        print("submitted the reference: submission", sid)
        return
    kept = json.loads(KEPT.read_text())
    sid, token = kept["id"], kept["token"]
    if what == "status":
        s = http_json("GET", f"{base}/api/submissions/{sid}", token)
        taken = f"started {s['started_at']}" if s["started_at"] else "no worker took it"
        print(f"submission {sid}: {s['status']}, attempts {s['attempts']}, {taken}")
        return
    while True:
        s = http_json("GET", f"{base}/api/submissions/{sid}", token)
        if s["status"] in ("graded", "error") or time.time() - kept["at"] > 600:
            break
        time.sleep(0.5)
    r = s.get("result") or {}
    perf = r.get("performance") or {}
    print("submission", sid, s["status"], s["verdict"], s["score"], "worker-side",
          r.get("duration_s"), "s; device", r.get("device_name"), "; sandboxed", r.get("sandboxed"))
    print("checks", [(c["name"], c["passed"]) for c in r.get("checks", [])])
    print("performance", {k: perf.get(k) for k in ("gbs", "fraction_of_copy", "points")})
    print(f"submitted to verdict: {time.time() - kept['at']:.1f} s (it waited for a worker "
          "that could grade)")
    for line in metrics_text(base).splitlines():
        if line.startswith(("autograder_graders", "autograder_broker_up",
                            "autograder_submit_to_verdict_seconds_count",
                            "autograder_submit_to_verdict_seconds_sum", "autograder_requeues")):
            print(line)


if __name__ == "__main__":
    main(*sys.argv[1:4])
