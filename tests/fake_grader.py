"""A stand-in for `python -m graders` in the API tests: instant, scripted verdicts.

`list --json` is the real list; `grade EXERCISE FILE --json ...` reads a directive
from the submission, e.g. `# fake: passed 100`, `# fake: failed 40`,
`# fake: grader_error`, `# fake: sleep 20 passed 100`, `# fake: rejected` (a timing
faster than a copy, flagged), and answers like the real CLI.
It appends one line per grading to $FAKE_GRADER_LOG when set.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["list"]:
        return subprocess.call([sys.executable, "-m", "graders", *args], cwd=REPO)
    exercise, path = args[1], Path(args[2])
    source = path.read_text()
    match = re.search(r"# fake: (?:sleep (\d+) )?(passed|failed|grader_error|rejected)(?: (\d+))?", source)
    sleep, verdict, score = (match.group(1), match.group(2), match.group(3)) if match else \
        (None, "failed", "0")
    if os.environ.get("FAKE_GRADER_LOG"):
        with open(os.environ["FAKE_GRADER_LOG"], "a") as log:
            log.write(f"{exercise} {verdict} {os.getpid()}\n")
    if sleep:
        time.sleep(int(sleep))
    if verdict == "grader_error":
        print("error: the grader broke", file=sys.stderr)
        return 2
    print(json.dumps({
        "exercise": exercise, "language": "triton", "device": "cpu",
        "device_name": "CPU (fake grader)", "verdict": verdict, "score": float(score or 0),
        "checks": [{"name": "random_rows", "passed": verdict == "passed", "message": "fake",
                    "points": float(score or 0), "max_points": 100.0}],
        "performance": None, "grader_version": "fake", "message": "",
        "flag": "1.40× the copy: not believed" if verdict == "rejected" else None,
        # the exercise parameters the server sent, as the real grader records them
        "params": json.loads(args[args.index("--params") + 1]) if "--params" in args else {},
        "slot": {"healthy": True, "problem": ""}}))
    return 0 if verdict == "passed" else 1


sys.exit(main())
