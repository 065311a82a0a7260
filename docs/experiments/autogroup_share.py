"""Does a nice value order processes that are sessions of their own (issue 43)?

Every runner is started in a session of its own (and bubblewrap makes another), and so is
every slot's worker. Where the kernel groups by session (``kernel.sched_autogroup_enabled``
= 1), it shares the CPU between the groups first, and a nice value orders threads only
inside their group. This spins one process at nice 0 beside N spinners at nice 19 (N = 3×
the cores), all for the same seconds, three ways: in one session; each in its own session;
each in its own session with its group given its nice (``/proc/self/autogroup``, by
``graders.shared.autogroup.set_nice``, as a runner does), and prints the CPU-seconds the nice-0
process got. Where sessions are grouped, the second gets about cores/(N+1) of a core and the
first and third nearly a whole one.

Usage: python3 docs/experiments/autogroup_share.py [--seconds 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SPIN = ("import time, resource\nend = time.time() + {s}\nwhile time.time() < end: pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOWER = "import os\nos.nice(19)\n{group}"
# the project's own helper (graders/runner/main.py gives a runner's group its nice with it);
# the kernel takes one unprivileged change of a group every 0.1 s, machine-wide, and the
# spinners all start at once: more retries than a runner's
GROUP = (f"import sys\nsys.path.insert(0, {ROOT!r})\n"
         "from graders.shared.autogroup import set_nice\nset_nice('self', 19, retries=200)\n")


def share(seconds: float, sessions: bool, groups: bool) -> float:
    n = 3 * (os.cpu_count() or 1)
    spin = SPIN.format(s=seconds + 0.5)
    lower = LOWER.format(group=GROUP if groups else "")
    others = [subprocess.Popen([sys.executable, "-c", lower + spin], start_new_session=sessions,
                               stdout=subprocess.DEVNULL) for _ in range(n)]
    time.sleep(0.5 + (0.12 * n if groups else 0))  # all spinning, their groups set
    me = subprocess.Popen([sys.executable, "-c", SPIN.format(s=seconds)],
                          start_new_session=sessions, stdout=subprocess.PIPE, text=True)
    got = float(me.communicate()[0].strip().splitlines()[-1])
    for p in others:
        p.wait()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args()
    try:
        enabled = open("/proc/sys/kernel/sched_autogroup_enabled").read().strip()
    except OSError:
        enabled = "absent"
    print(f"sched_autogroup_enabled: {enabled}; {os.cpu_count()} cores; "
          f"{3 * (os.cpu_count() or 1)} spinners at nice 19 beside one at nice 0, "
          f"{a.seconds:g} s")
    for label, sessions, groups in (("one session", False, False),
                                    ("a session each", True, False),
                                    ("a session each, groups at their nice", True, True)):
        print(f"  {label}: the nice-0 process got {share(a.seconds, sessions, groups):.2f} "
              f"CPU-s of {a.seconds:g}")


if __name__ == "__main__":
    main()
