"""What a fork bomb's job looks like from the host while it runs (issue 26, item 10).

    GRADERS_NO_CGROUP=1 python3 docs/experiments/fork_probe.py [cuda|cpu]

Grades the attack suite's fork bomb as a job uid (a root grader without a job cgroup, as on
the H200 machine) while a sampler reads /proc every 50 ms and keeps, for the job uids, the
most processes, zombies and threads seen at once. Prints them with the verdict.
"""

import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from test_process_cap import FORK_BOMB, _traversable  # noqa: E402

from graders.engine.checker import grade  # noqa: E402
from graders.engine.registry import get_exercise  # noqa: E402
from graders.isolation import jobuids  # noqa: E402
from graders.isolation.sandbox import default_launcher  # noqa: E402
from graders.shared.vocabulary import Device  # noqa: E402


def sample(peak: dict, stop: threading.Event) -> None:
    uids = range(jobuids.UID_BASE, jobuids.UID_BASE + jobuids.UID_COUNT)
    while not stop.wait(0.05):
        live = zombies = threads = 0
        for _pid, fields in jobuids.process_statuses():
            try:
                if int(fields["Uid"].split()[0]) not in uids:
                    continue
                if fields["State"].strip().startswith("Z"):
                    zombies += 1
                else:
                    live += 1
                threads += int(fields["Threads"])
            except (OSError, ValueError, KeyError):
                continue
        for key, value in (("live", live), ("zombies", zombies), ("threads", threads),
                           ("processes", live + zombies)):
            peak[key] = max(peak.get(key, 0), value)


def main() -> None:
    device = Device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
    _traversable([sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), str(REPO),
                  "/tmp"])
    path = Path("/tmp/fork-probe/submission.py")
    path.parent.mkdir(exist_ok=True)
    path.write_text(FORK_BOMB)
    launcher = default_launcher(sandbox=True, gpu_index=0 if device is Device.CUDA else None)
    peak: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(peak, stop))
    sampler.start()
    started = time.monotonic()
    result = grade(get_exercise("safe_softmax"), path, device, launcher=launcher,
                   performance=False)
    stop.set()
    sampler.join()
    print(f"fork bomb on {device.value}: {result.verdict.value} in "
          f"{time.monotonic() - started:.1f} s; most at once for the job uids: {peak}; "
          f"{result.message[:200]}")


if __name__ == "__main__":
    main()
